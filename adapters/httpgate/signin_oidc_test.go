package httpgate_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/adapters/httpgate"
)

// oidcProvider is an OpenID provider on a real listener whose token
// endpoint answers each code with an ID token made by idToken from the
// nonce of the authorization that issued the code.
type oidcProvider struct {
	*httptest.Server
	key     *rsa.PrivateKey
	mu      sync.Mutex
	nonces  map[string]string // by code
	idToken func(p *oidcProvider, nonce string) string
}

func (p *oidcProvider) sign(claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(p.key)
	if err != nil {
		panic(err)
	}
	return s
}

func (p *oidcProvider) claims(nonce string) jwt.MapClaims {
	return jwt.MapClaims{"iss": p.URL, "aud": "pages", "sub": "alice", "tenant": "acme", "nonce": nonce,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
}

func newOIDCProvider(t *testing.T) *oidcProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &oidcProvider{key: key, nonces: map[string]string{}}
	p.idToken = func(p *oidcProvider, nonce string) string { return p.sign(p.claims(nonce)) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize",
			"token_endpoint": p.URL + "/token", "jwks_uri": p.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		code := rand.Text()
		p.mu.Lock()
		p.nonces[code] = r.URL.Query().Get("nonce")
		p.mu.Unlock()
		u, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
		u.RawQuery = url.Values{"code": {code}, "state": {r.URL.Query().Get("state")}}.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		p.mu.Lock()
		nonce, ok := p.nonces[r.PostForm.Get("code")]
		p.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "id_token": p.idToken(p, nonce)})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

// signInVia runs a sign-in through the provider as far as the callback:
// /signin?next=next at the pages, the provider's authorization, and
// returns the callback's path and query (not yet visited).
func signInVia(t *testing.T, per *person, op *oidcProvider, next string) string {
	t.Helper()
	r := per.do("GET", "/signin?next="+url.QueryEscape(next), nil)
	if r.status != http.StatusFound || !strings.HasPrefix(r.header.Get("Location"), op.URL+"/authorize") {
		t.Fatalf("/signin: %d %s", r.status, r.header.Get("Location"))
	}
	resp, err := per.client.Get(r.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	return "/callback?" + cb.RawQuery
}

// TestPagesOIDCSignInTakesOnlyThisProvidersTokenForThisClientOnce: an ID
// token of another audience, of another issuer, with another nonce,
// unsigned (alg none), or signed by another key signs no one in; a
// callback replayed, or brought by another browser, signs no one in; and
// a sign-in asked to go elsewhere (//evil, /\evil, encoded) lands on the
// inbox.
func TestPagesOIDCSignInTakesOnlyThisProvidersTokenForThisClientOnce(t *testing.T) {
	op := newOIDCProvider(t)
	rig := newPagesRig(t, nil, httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback"}))
	good := op.idToken
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	bad := map[string]func(p *oidcProvider, nonce string) string{
		"another audience": func(p *oidcProvider, nonce string) string {
			c := p.claims(nonce)
			c["aud"] = "someone-else"
			return p.sign(c)
		},
		"another issuer": func(p *oidcProvider, nonce string) string {
			c := p.claims(nonce)
			c["iss"] = "https://evil.example"
			return p.sign(c)
		},
		"another nonce": func(p *oidcProvider, nonce string) string { return p.sign(p.claims("other")) },
		"no nonce":      func(p *oidcProvider, nonce string) string { return p.sign(p.claims("")) },
		"expired": func(p *oidcProvider, nonce string) string {
			c := p.claims(nonce)
			c["exp"] = time.Now().Add(-time.Hour).Unix()
			return p.sign(c)
		},
		"alg none": func(p *oidcProvider, nonce string) string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, p.claims(nonce)).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		},
		"another key": func(p *oidcProvider, nonce string) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, p.claims(nonce))
			tok.Header["kid"] = "k1"
			s, _ := tok.SignedString(other)
			return s
		},
		"HS256 with the public key": func(p *oidcProvider, nonce string) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, p.claims(nonce))
			tok.Header["kid"] = "k1"
			s, _ := tok.SignedString([]byte("k1"))
			return s
		},
	}
	for name, mk := range bad {
		op.idToken = mk
		per := rig.newPerson(t)
		cb := signInVia(t, per, op, "/")
		if r := per.do("GET", cb, nil); r.status != http.StatusUnauthorized {
			t.Errorf("%s: the callback answered %d %s", name, r.status, r.header.Get("Location"))
		}
		if r := per.do("GET", "/", nil); r.status != http.StatusSeeOther {
			t.Errorf("%s: signed in (the inbox answered %d)", name, r.status)
		}
	}
	op.idToken = good

	// Replayed, and brought by another browser.
	per := rig.newPerson(t)
	cb := signInVia(t, per, op, "/")
	thief := rig.newPerson(t)
	if r := thief.do("GET", cb, nil); r.status != http.StatusBadRequest {
		t.Errorf("another browser's callback: %d", r.status)
	}
	per = rig.newPerson(t)
	cb = signInVia(t, per, op, "/")
	base, _ := url.Parse(per.base)
	var browser string
	for _, c := range per.client.Jar.Cookies(base) {
		if c.Name == "axgate_signin" {
			browser = c.Value
		}
	}
	if r := per.do("GET", cb, nil); r.status != http.StatusSeeOther {
		t.Fatalf("a good sign-in: %d %s", r.status, r.body)
	}
	// The same callback again, with the sign-in cookie it came with.
	replay := rig.newPerson(t)
	if r := replay.do("GET", cb, nil, "Cookie", "axgate_signin="+browser); r.status != http.StatusBadRequest || browser == "" {
		t.Errorf("the callback replayed: %d (cookie %q)", r.status, browser)
	}

	for _, next := range []string{"//evil.example", "/\\evil.example", "/%2F%2Fevil.example", "https://evil.example", "/requests/../../evil", "//evil.example/requests/x", "\t//evil.example", "/requests/x\n//evil"} {
		per := rig.newPerson(t)
		r := per.do("GET", signInVia(t, per, op, next), nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
			t.Errorf("next=%q: %d to %q", next, r.status, r.header.Get("Location"))
		}
	}
}
