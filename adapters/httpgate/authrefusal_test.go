package httpgate_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// callRefusal posts a call to a tool server on a real listener and returns
// the status, the challenge and the decoded AXAG envelope.
func callRefusal(t *testing.T, auth httpgate.PrincipalFunc, header ...string) (int, string, axerr.Envelope) {
	t.Helper()
	srv, err := httpgate.NewToolServer(enforcer(t), map[string]middleware.Invoker{"ping": &spy{}}, httpgate.WithPrincipal(auth))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	req, err := http.NewRequest("POST", ts.URL+"/tools/ping/call", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env axerr.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("the refusal is not the AXAG envelope: %v\n%s", err, body)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), env
}

// TestAPIKeyRefusalSaysWhyWithoutBearerChallenge: a service that
// authenticates with an API key and refuses one gets its own reason in the
// 401 ("bad api key"), and no Bearer challenge, which would send the
// client looking for a token the service does not take. Before: "the
// request is not authenticated" and WWW-Authenticate: Bearer realm="axgate".
func TestAPIKeyRefusalSaysWhyWithoutBearerChallenge(t *testing.T) {
	apiKey := func(r *http.Request) (middleware.Principal, error) {
		if r.Header.Get("X-API-Key") != "k-123" {
			return middleware.Principal{}, errors.New("bad api key")
		}
		return middleware.Principal{ID: "svc"}, nil
	}
	status, challenge, env := callRefusal(t, apiKey, "X-API-Key", "nope")
	if status != http.StatusUnauthorized || env.Error.Code != axerr.CodeUnauthenticated {
		t.Fatalf("%d %s", status, env.Error.Code)
	}
	if env.Error.Message != "the request is not authenticated: bad api key" {
		t.Errorf("message %q does not say the service's reason", env.Error.Message)
	}
	if challenge != "" {
		t.Errorf("a Bearer challenge for an API key refusal: %q", challenge)
	}
}

// TestWrongAudienceNamesTheExpectedOne: a bearer token for another
// audience is refused in the AXAG envelope, naming the audience this server
// takes (in the message and as details.expected_audience: it is the
// server's public name, not a secret), with the Bearer invalid_token
// challenge. Before, the message said only "(wrong audience)".
func TestWrongAudienceNamesTheExpectedOne(t *testing.T) {
	f := newBearerFixture(t)
	claims := f.claims()
	claims["aud"] = "billing-api"
	status, challenge, env := callRefusal(t, f.auth, "Authorization", "Bearer "+f.sign(t, claims, nil))
	if status != http.StatusUnauthorized || env.Error.Code != axerr.CodeUnauthenticated || env.Error.Details["reason"] != "wrong_audience" {
		t.Fatalf("%d %s %v", status, env.Error.Code, env.Error.Details)
	}
	if want := `the bearer token is not valid (wrong audience): this server accepts only tokens whose aud names "shop-api"`; env.Error.Message != want {
		t.Errorf("message %q, want %q", env.Error.Message, want)
	}
	if env.Error.Details["expected_audience"] != "shop-api" {
		t.Errorf("details %v lack expected_audience", env.Error.Details)
	}
	if challenge != `Bearer realm="axgate", error="invalid_token"` {
		t.Errorf("challenge %q", challenge)
	}
	// A missing token still gets the plain Bearer challenge.
	if _, challenge, _ := callRefusal(t, f.auth); challenge != `Bearer realm="axgate"` {
		t.Errorf("no token: challenge %q", challenge)
	}
}
