package gateway_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/token"
)

// TestBearerRefusalIsTheAXAGEnvelope: /mcp refuses a bearer token for
// another audience in the AXAG error envelope, naming the audience it
// takes, with the Bearer resource_metadata challenge (error="invalid_token"
// since a token came); a request without a token keeps the plain
// challenge. Before, the go-sdk answered in plain text: "invalid token: the
// bearer token is not valid (wrong audience)".
func TestBearerRefusalIsTheAXAGEnvelope(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := token.NewKeySet(token.Key{ID: "k1", Algorithm: "EdDSA", Public: pub})
	if err != nil {
		t.Fatal(err)
	}
	const audience = "https://gw.example.com/mcp"
	bearer, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(ks), Issuer: "https://id.example.com", Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL + "/"}, pinOf(t, upURL, "write_note"),
		gateway.WithBearer(bearer, &oauthex.ProtectedResourceMetadata{Resource: audience, AuthorizationServers: []string{"https://id.example.com"}}))
	url := serve(t, g)
	meta := `resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource"`

	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": "https://id.example.com", "aud": "https://elsewhere.example.com/mcp", "sub": "carol",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "k1"
	other, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	post := func(authorization string) (*http.Response, axerr.Envelope) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var env axerr.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("the 401 is not the AXAG envelope: %v\n%s", err, body)
		}
		return resp, env
	}

	resp, env := post("Bearer " + other)
	if resp.StatusCode != http.StatusUnauthorized || env.Error.Code != axerr.CodeUnauthenticated || env.Error.Details["reason"] != "wrong_audience" {
		t.Fatalf("%d %+v", resp.StatusCode, env.Error)
	}
	if want := `the bearer token is not valid (wrong audience): this server accepts only tokens whose aud names "` + audience + `"`; env.Error.Message != want {
		t.Errorf("message %q, want %q", env.Error.Message, want)
	}
	if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer "+meta+`, error="invalid_token"` {
		t.Errorf("challenge %q", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}

	resp, env = post("")
	if resp.StatusCode != http.StatusUnauthorized || env.Error.Details["reason"] != "missing_token" || resp.Header.Get("WWW-Authenticate") != "Bearer "+meta {
		t.Errorf("no token: %d %q %+v", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), env.Error)
	}
}
