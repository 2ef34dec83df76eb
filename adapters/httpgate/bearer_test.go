package httpgate_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/token"
)

type bearerFixture struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	auth httpgate.PrincipalFunc
}

func newBearerFixture(t *testing.T) *bearerFixture {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := token.NewKeySet(token.Key{ID: "k1", Algorithm: "EdDSA", Public: pub})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := httpgate.JWTBearer(httpgate.BearerConfig{
		Keyfunc:  token.Keyfunc(ks),
		Issuer:   "https://id.example",
		Audience: "shop-api",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &bearerFixture{priv: priv, pub: pub, auth: auth}
}

func (f *bearerFixture) claims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "https://id.example", "aud": "shop-api", "sub": "user-1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"tenant": "acme", "roles": []string{"customer", "admin"}, "scope": "read cart.*",
	}
}

func (f *bearerFixture) sign(t *testing.T, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = "k1"
	for k, v := range header {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(f.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *bearerFixture) try(authorization string) error {
	r := httptest.NewRequest("GET", "/", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	_, err := f.auth(r)
	return err
}

func TestJWTBearerPrincipal(t *testing.T) {
	f := newBearerFixture(t)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "bearer "+f.sign(t, f.claims(), nil))
	p, err := f.auth(r)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "user-1" || p.Tenant != "acme" || strings.Join(p.Roles, ",") != "customer,admin" || strings.Join(p.Scopes, ",") != "read,cart.*" || p.Claims["iss"] != "https://id.example" {
		t.Fatalf("principal = %+v", p)
	}
	// No scope claim: nil scopes (nothing stated), not an empty grant.
	c := f.claims()
	delete(c, "scope")
	c["roles"] = "customer admin"
	r.Header.Set("Authorization", "Bearer "+f.sign(t, c, nil))
	if p, err = f.auth(r); err != nil || p.Scopes != nil || len(p.Roles) != 2 {
		t.Fatalf("principal = %+v, %v", p, err)
	}
}

func TestJWTBearerRefusals(t *testing.T) {
	f := newBearerFixture(t)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	with := func(k string, v any) jwt.MapClaims {
		c := f.claims()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, f.claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hsConfused := jwt.NewWithClaims(jwt.SigningMethodHS256, f.claims())
	hsConfused.Header["kid"] = "k1"
	confused, _ := hsConfused.SignedString([]byte(f.pub))
	otherKey := jwt.NewWithClaims(jwt.SigningMethodEdDSA, f.claims())
	otherKey.Header["kid"] = "k1"
	forged, _ := otherKey.SignedString(otherPriv)

	cases := []struct {
		name, header, reason string
	}{
		{"no header", "", "missing_token"},
		{"basic scheme", "Basic dXNlcjpwYXNz", "missing_token"},
		{"empty bearer", "Bearer ", "missing_token"},
		{"garbage", "Bearer not.a.jwt", "malformed"},
		{"too large", "Bearer " + strings.Repeat("a", 9000), "too_large"},
		{"expired", "Bearer " + f.sign(t, with("exp", time.Now().Add(-time.Hour).Unix()), nil), "expired"},
		{"not yet valid", "Bearer " + f.sign(t, with("nbf", time.Now().Add(time.Hour).Unix()), nil), "not_yet_valid"},
		{"no exp", "Bearer " + f.sign(t, with("exp", nil), nil), "missing_claim"},
		{"wrong issuer", "Bearer " + f.sign(t, with("iss", "https://evil.example"), nil), "wrong_issuer"},
		{"wrong audience", "Bearer " + f.sign(t, with("aud", "other-api"), nil), "wrong_audience"},
		{"no subject", "Bearer " + f.sign(t, with("sub", nil), nil), "missing_claim"},
		{"tenant not a string", "Bearer " + f.sign(t, with("tenant", 7), nil), "bad_claim"},
		{"roles not strings", "Bearer " + f.sign(t, with("roles", []any{1, 2}), nil), "bad_claim"},
		{"alg none", "Bearer " + none, "bad_signature"},
		{"HS256 with the public key", "Bearer " + confused, "bad_signature"},
		{"other signing key", "Bearer " + forged, "bad_signature"},
		{"unknown kid", "Bearer " + f.sign(t, f.claims(), map[string]any{"kid": "k9"}), "unknown_key"},
		{"crit header", "Bearer " + f.sign(t, f.claims(), map[string]any{"crit": []string{"exp"}}), "unsupported_critical_header"},
		{"confirmation token", "Bearer " + f.sign(t, f.claims(), map[string]any{"typ": "axag-confirmation+jwt"}), "wrong_type"},
		{"approval token", "Bearer " + f.sign(t, f.claims(), map[string]any{"typ": "axag-approval+jwt"}), "wrong_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := f.try(c.header)
			e, ok := axerr.As(err)
			if !ok || e.Code != axerr.CodeUnauthenticated || e.Details["reason"] != c.reason {
				t.Fatalf("err = %v (details %v), want reason %s", err, e.Details, c.reason)
			}
			// Over HTTP: 401 with a Bearer challenge, invalid_token once a
			// token was sent.
			rec := httptest.NewRecorder()
			httpgate.WriteError(rec, err)
			ch := rec.Header().Get("WWW-Authenticate")
			if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(ch, "Bearer") || strings.Contains(ch, "invalid_token") != (c.reason != "missing_token") {
				t.Fatalf("%d %q", rec.Code, ch)
			}
		})
	}
}

func TestJWTBearerConfiguration(t *testing.T) {
	kf := func(*jwt.Token) (any, error) { return nil, nil }
	for _, cfg := range []httpgate.BearerConfig{
		{Issuer: "i", Audience: "a"},
		{Keyfunc: kf, Audience: "a"},
		{Keyfunc: kf, Issuer: "i"},
		{Keyfunc: kf, Issuer: "i", Audience: "a", Algorithms: []string{"none"}},
	} {
		if _, err := httpgate.JWTBearer(cfg); err == nil {
			t.Fatalf("no error for %+v", cfg)
		}
	}
}

// A token verified once is not verified again while it is valid; with the
// cache off, every request pays for the signature.
func TestJWTBearerCache(t *testing.T) {
	f := newBearerFixture(t)
	ks, err := token.NewKeySet(token.Key{ID: "k1", Algorithm: "EdDSA", Public: f.pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size, want int
	}{{0, 1}, {-1, 3}} {
		var lookups int
		kf := token.Keyfunc(ks)
		auth, err := httpgate.JWTBearer(httpgate.BearerConfig{
			Keyfunc: func(tok *jwt.Token) (any, error) {
				// A cache hit asks for the key again with the remembered
				// header only; a verification hands over the raw token.
				if tok.Raw != "" {
					lookups++
				}
				return kf(tok)
			},
			Issuer: "https://id.example", Audience: "shop-api", CacheSize: c.size,
		})
		if err != nil {
			t.Fatal(err)
		}
		tok := f.sign(t, f.claims(), nil)
		for range 3 {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			if p, err := auth(r); err != nil || p.ID != "user-1" {
				t.Fatalf("cache %d: %+v, %v", c.size, p, err)
			}
		}
		if lookups != c.want {
			t.Fatalf("cache %d: %d verifications, want %d", c.size, lookups, c.want)
		}
		// A tampered copy of a cached token is not the cached token. The
		// character changed sits inside the signature, where all six bits of
		// a base64url character are signature bits, so the copy is always a
		// different signature (the last character carries padding bits, and
		// replacing it could leave the token as it was).
		i := len(tok) - 10
		swap := byte('A')
		if tok[i] == 'A' {
			swap = 'B'
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok[:i]+string(swap)+tok[i+1:])
		if _, err := auth(r); err == nil {
			t.Fatalf("cache %d: tampered token accepted", c.size)
		}
	}
}

// rotatingKeys is a key set whose keys change, as a remote JWK Set does on
// refresh.
type rotatingKeys struct {
	mu   sync.Mutex
	keys map[string]token.Key
}

func (r *rotatingKeys) Key(kid string) (token.Key, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.keys[kid]
	if !ok {
		return token.Key{}, token.ErrUnknownKey
	}
	return k, nil
}

func (r *rotatingKeys) set(keys ...token.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = map[string]token.Key{}
	for _, k := range keys {
		r.keys[k.ID] = k
	}
}

// Regression (security review): a verified token stayed in the cache, and
// valid, after its key was revoked from the key set, until its exp.
func TestJWTBearerCacheForgetsRevokedKeys(t *testing.T) {
	f := newBearerFixture(t)
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k1 := token.Key{ID: "k1", Algorithm: "EdDSA", Public: f.pub}
	for _, c := range []struct {
		name   string
		after  []token.Key
		reason string
	}{
		{"revoked", nil, "unknown_key"},
		{"replaced under the same kid", []token.Key{{ID: "k1", Algorithm: "EdDSA", Public: otherPub}}, "bad_signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := &rotatingKeys{}
			keys.set(k1)
			auth, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(keys), Issuer: "https://id.example", Audience: "shop-api"})
			if err != nil {
				t.Fatal(err)
			}
			tok := f.sign(t, f.claims(), nil)
			call := func() error {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer "+tok)
				_, err := auth(r)
				return err
			}
			for range 2 { // verified, then from the cache
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}
			keys.set(c.after...)
			err = call()
			e, ok := axerr.As(err)
			if !ok || e.Code != axerr.CodeUnauthenticated || e.Details["reason"] != c.reason {
				t.Fatalf("after the key set changed: %v, want 401 %s", err, c.reason)
			}
			// Restoring the key makes the token good again: nothing was
			// remembered as refused.
			keys.set(k1)
			if err := call(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
