package token_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/token"
)

func TestJWKSRoundTrip(t *testing.T) {
	dev, err := token.GenerateDevKey("dev-1")
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec, _ := token.NewSigner("ec-1", ecKey)
	doc, err := token.MarshalJWKS(dev.PublicKey(), ec.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), `"d"`) {
		t.Fatalf("public JWKS holds private material: %s", doc)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := token.LoadJWKSFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*token.Signer{dev, ec} {
		k, err := set.Key(s.KeyID())
		if err != nil {
			t.Fatal(err)
		}
		if k.Algorithm != s.Algorithm() {
			t.Errorf("key %s bound to %s, want %s", s.KeyID(), k.Algorithm, s.Algorithm())
		}
		tok, err := s.Sign("JWT", jwt.RegisteredClaims{Subject: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jwt.Parse(tok, token.Keyfunc(set)); err != nil {
			t.Errorf("%s: token does not verify with the JWKS: %v", s.KeyID(), err)
		}
	}
	if _, err := set.Key(""); !errors.Is(err, token.ErrUnknownKey) {
		t.Errorf("a set of two keys answered an empty kid: %v", err)
	}

	// Dev key files: private JWK and PEM read back to the same key.
	priv, err := dev.MarshalPrivateJWK()
	if err != nil {
		t.Fatal(err)
	}
	back, err := token.ParseSigningKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if back.KeyID() != "dev-1" || !back.PublicKey().Public.(ed25519.PublicKey).Equal(dev.PublicKey().Public) {
		t.Fatalf("private JWK round trip: kid %q, other key", back.KeyID())
	}
	der, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	pemSigner, err := token.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "ec-pem")
	if err != nil || pemSigner.Algorithm() != "ES256" {
		t.Fatalf("PEM signing key: %v, %v", pemSigner, err)
	}
}

func TestParseJWKSBindsAndRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"oct key":       `{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI"}]}`,
		"not JSON":      `{"keys":`,
		"alg mismatch":  `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"e","alg":"RS256","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		"duplicate kid": `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"e","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},{"kty":"OKP","crv":"Ed25519","kid":"e","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
	} {
		if _, err := token.ParseJWKS([]byte(doc)); err == nil {
			t.Errorf("%s: ParseJWKS accepted it", name)
		}
	}
	set, err := token.ParseJWKS([]byte(`{"keys":[
	  {"kty":"OKP","crv":"Ed25519","kid":"sig","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
	  {"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := set.Key("sig"); err != nil || k.Algorithm != "EdDSA" {
		t.Errorf("Ed25519 key without alg: %+v, %v; want bound to EdDSA", k, err)
	}
	if _, err := set.Key("enc"); err == nil {
		t.Error("a key for encryption was kept for signatures")
	}
}

func TestKeyValidation(t *testing.T) {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for name, k := range map[string]token.Key{
		"no algorithm":        {ID: "a", Public: edKey.Public()},
		"EdDSA with EC key":   {ID: "a", Algorithm: "EdDSA", Public: &ecKey.PublicKey},
		"ES256 with P-384":    {ID: "a", Algorithm: "ES256", Public: &ecKey.PublicKey},
		"HS256 short secret":  {ID: "a", Algorithm: "HS256", Public: []byte("short")},
		"HS256 with a pubkey": {ID: "a", Algorithm: "HS256", Public: edKey.Public()},
		"alg none":            {ID: "a", Algorithm: "none", Public: []byte(strings.Repeat("x", 32))},
	} {
		if err := k.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	if _, err := token.NewSigner("pub", edKey.Public()); err == nil {
		t.Error("NewSigner accepted a public key")
	}
	if _, err := token.HMACKey("h", []byte(strings.Repeat("k", 32))); err != nil {
		t.Errorf("HMACKey(32 bytes): %v", err)
	}
}

func TestKeyfuncHelper(t *testing.T) {
	dev, _ := token.GenerateDevKey("k1")
	set, _ := token.NewKeySet(dev.PublicKey())
	good, _ := dev.Sign("JWT", jwt.RegisteredClaims{Subject: "bob", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute))})
	if tok, err := jwt.Parse(good, token.Keyfunc(set), jwt.WithExpirationRequired()); err != nil || !tok.Valid {
		t.Fatalf("good token: %v", err)
	}
	crit := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{})
	crit.Header["kid"] = "k1"
	raw, _ := crit.SignedString([]byte(dev.PublicKey().Public.(ed25519.PublicKey)))
	_, err := jwt.Parse(raw, token.Keyfunc(set))
	var te *token.Error
	if !errors.As(err, &te) || te.Reason != reasons.TokenAlgorithm {
		t.Fatalf("HS256 with the public key through Keyfunc = %v, want %s", err, reasons.TokenAlgorithm)
	}
}

// TestRemoteKeySet serves a JWK Set over HTTP: the set is fetched once at
// start, an unknown kid is refused without a request, and the background
// refresh picks up a rotated key.
func TestRemoteKeySet(t *testing.T) {
	first, _ := token.GenerateDevKey("k1")
	second, _ := token.GenerateDevKey("k2")
	var (
		mu      sync.Mutex
		serving = []token.Key{first.PublicKey()}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		doc, err := token.MarshalJWKS(serving...)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	defer srv.Close()

	set, err := token.NewRemoteKeySet(srv.URL, token.RemoteKeySetOptions{RefreshInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if k, err := set.Key("k1"); err != nil || k.Algorithm != "EdDSA" {
		t.Fatalf("Key(k1) = %+v, %v", k, err)
	}

	// An unknown kid is refused from memory: no request to the server.
	var quietRequests atomic.Int32
	quietSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		quietRequests.Add(1)
		doc, _ := token.MarshalJWKS(first.PublicKey())
		_, _ = w.Write(doc)
	}))
	defer quietSrv.Close()
	quiet, err := token.NewRemoteKeySet(quietSrv.URL, token.RemoteKeySetOptions{RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	for _, kid := range []string{"k2", "", "k3"} {
		if _, err := quiet.Key(kid); !errors.Is(err, token.ErrUnknownKey) {
			t.Fatalf("Key(%q) = %v, want ErrUnknownKey", kid, err)
		}
	}
	if n := quietRequests.Load(); n != 1 {
		t.Fatalf("the JWKS URL was fetched %d times; want once, at start", n)
	}

	mu.Lock()
	serving = []token.Key{second.PublicKey()}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := set.Key("k2"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never picked up the rotated key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := set.Key("k1"); err == nil {
		t.Error("a key removed from the set is still accepted after the refresh")
	}

	if _, err := token.NewRemoteKeySet(srv.URL+"/missing\x00", token.RemoteKeySetOptions{}); err == nil {
		t.Error("a bad URL was accepted")
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if _, err := token.NewRemoteKeySet(down.URL, token.RemoteKeySetOptions{Timeout: time.Second}); err == nil {
		t.Error("a JWKS URL that cannot be fetched at start was accepted")
	}
}
