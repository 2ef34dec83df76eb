package gates_test

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

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// TestGoJoseTokensAccepted mints tokens with another JOSE library, from the
// documented claims only, and checks that the gate accepts them.
func TestGoJoseTokensAccepted(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey := tkRSAKey(t)
	keys, err := gates.NewKeySet(
		gates.Key{ID: "ed", Algorithm: gates.AlgEdDSA, Public: edKey.Public()},
		gates.Key{ID: "ec", Algorithm: gates.AlgES256, Public: &ecKey.PublicKey},
		gates.Key{ID: "rsa", Algorithm: gates.AlgRS256, Public: &rsaKey.PublicKey},
	)
	if err != nil {
		t.Fatal(err)
	}
	f := newTkFixture(t)
	v, err := gates.NewVerifier(gates.VerifierConfig{Type: gates.TypConfirmation, Keys: keys, Issuer: "shop-ui", Audience: "shop-api", MaxLifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := gates.NewConfirmation(gates.ConfirmationConfig{Verifier: v, Replay: f.replay})
	if err != nil {
		t.Fatal(err)
	}
	const args = `{"order_id":"o-7","amount":12.5}`
	digest, _ := f.call("order.refund", args).ArgsSHA256()

	for _, tc := range []struct {
		kid string
		alg jose.SignatureAlgorithm
		key any
	}{
		{"ed", jose.EdDSA, edKey},
		{"ec", jose.ES256, ecKey},
		{"rsa", jose.RS256, rsaKey},
	} {
		t.Run(string(tc.alg), func(t *testing.T) {
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: tc.alg, Key: tc.key},
				(&jose.SignerOptions{}).WithType(gates.TypConfirmation).WithHeader("kid", tc.kid))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			std := josejwt.Claims{
				Issuer: "shop-ui", Subject: "alice", Audience: josejwt.Audience{"shop-api"},
				ID: rand.Text(), IssuedAt: josejwt.NewNumericDate(now), Expiry: josejwt.NewNumericDate(now.Add(3 * time.Minute)),
				NotBefore: josejwt.NewNumericDate(now),
			}
			custom := map[string]any{"intent": "order.refund", "tenant": "acme", "args_sha256": digest}
			tok, err := josejwt.Signed(signer).Claims(std).Claims(custom).Serialize()
			if err != nil {
				t.Fatal(err)
			}
			c := f.call("order.refund", args)
			c.Credentials.Confirmation = tok
			_, err = gate.Stage().Interceptor(t.Context(), c, middleware.InvokerFunc(tkOK))
			if err != nil {
				t.Fatalf("go-jose %s token refused: %v", tc.alg, err)
			}
		})
	}
}

func TestJWKSRoundTrip(t *testing.T) {
	dev, err := gates.GenerateDevKey("dev-1")
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec, _ := gates.NewSigner("ec-1", ecKey)
	doc, err := gates.MarshalJWKS(dev.PublicKey(), ec.PublicKey())
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
	set, err := gates.LoadJWKSFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*gates.Signer{dev, ec} {
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
		if _, err := jwt.Parse(tok, gates.Keyfunc(set)); err != nil {
			t.Errorf("%s: token does not verify with the JWKS: %v", s.KeyID(), err)
		}
	}
	if _, err := set.Key(""); !errors.Is(err, gates.ErrUnknownKey) {
		t.Errorf("a set of two keys answered an empty kid: %v", err)
	}

	// Dev key files: private JWK and PEM read back to the same key.
	priv, err := dev.MarshalPrivateJWK()
	if err != nil {
		t.Fatal(err)
	}
	back, err := gates.ParseSigningKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if back.KeyID() != "dev-1" || !back.PublicKey().Public.(ed25519.PublicKey).Equal(dev.PublicKey().Public) {
		t.Fatalf("private JWK round trip: kid %q, other key", back.KeyID())
	}
	der, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	pemSigner, err := gates.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "ec-pem")
	if err != nil || pemSigner.Algorithm() != gates.AlgES256 {
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
		if _, err := gates.ParseJWKS([]byte(doc)); err == nil {
			t.Errorf("%s: ParseJWKS accepted it", name)
		}
	}
	set, err := gates.ParseJWKS([]byte(`{"keys":[
	  {"kty":"OKP","crv":"Ed25519","kid":"sig","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
	  {"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := set.Key("sig"); err != nil || k.Algorithm != gates.AlgEdDSA {
		t.Errorf("Ed25519 key without alg: %+v, %v; want bound to EdDSA", k, err)
	}
	if _, err := set.Key("enc"); err == nil {
		t.Error("a key for encryption was kept for signatures")
	}
}

func TestKeyValidation(t *testing.T) {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for name, k := range map[string]gates.Key{
		"no algorithm":        {ID: "a", Public: edKey.Public()},
		"EdDSA with EC key":   {ID: "a", Algorithm: gates.AlgEdDSA, Public: &ecKey.PublicKey},
		"ES256 with P-384":    {ID: "a", Algorithm: gates.AlgES256, Public: &ecKey.PublicKey},
		"HS256 short secret":  {ID: "a", Algorithm: gates.AlgHS256, Public: []byte("short")},
		"HS256 with a pubkey": {ID: "a", Algorithm: gates.AlgHS256, Public: edKey.Public()},
		"alg none":            {ID: "a", Algorithm: "none", Public: []byte(strings.Repeat("x", 32))},
	} {
		if err := k.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	if _, err := gates.NewSigner("pub", edKey.Public()); err == nil {
		t.Error("NewSigner accepted a public key")
	}
	if _, err := gates.HMACKey("h", []byte(strings.Repeat("k", 32))); err != nil {
		t.Errorf("HMACKey(32 bytes): %v", err)
	}
}

func TestKeyfuncHelper(t *testing.T) {
	dev, _ := gates.GenerateDevKey("k1")
	set, _ := gates.NewKeySet(dev.PublicKey())
	good, _ := dev.Sign("JWT", jwt.RegisteredClaims{Subject: "bob", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute))})
	if tok, err := jwt.Parse(good, gates.Keyfunc(set), jwt.WithExpirationRequired()); err != nil || !tok.Valid {
		t.Fatalf("good token: %v", err)
	}
	crit := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{})
	crit.Header["kid"] = "k1"
	raw, _ := crit.SignedString([]byte(dev.PublicKey().Public.(ed25519.PublicKey)))
	_, err := jwt.Parse(raw, gates.Keyfunc(set))
	var te *gates.TokenError
	if !errors.As(err, &te) || te.Reason != gates.ReasonAlgorithm {
		t.Fatalf("HS256 with the public key through Keyfunc = %v, want %s", err, gates.ReasonAlgorithm)
	}
}

// TestRemoteKeySet serves a JWK Set over HTTP: the set is fetched once at
// start, an unknown kid is refused without a request, and the background
// refresh picks up a rotated key.
func TestRemoteKeySet(t *testing.T) {
	first, _ := gates.GenerateDevKey("k1")
	second, _ := gates.GenerateDevKey("k2")
	var (
		mu      sync.Mutex
		serving = []gates.Key{first.PublicKey()}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		doc, err := gates.MarshalJWKS(serving...)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	defer srv.Close()

	set, err := gates.NewRemoteKeySet(srv.URL, gates.RemoteKeySetOptions{RefreshInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if k, err := set.Key("k1"); err != nil || k.Algorithm != gates.AlgEdDSA {
		t.Fatalf("Key(k1) = %+v, %v", k, err)
	}

	// An unknown kid is refused from memory: no request to the server.
	var quietRequests atomic.Int32
	quietSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		quietRequests.Add(1)
		doc, _ := gates.MarshalJWKS(first.PublicKey())
		_, _ = w.Write(doc)
	}))
	defer quietSrv.Close()
	quiet, err := gates.NewRemoteKeySet(quietSrv.URL, gates.RemoteKeySetOptions{RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	for _, kid := range []string{"k2", "", "k3"} {
		if _, err := quiet.Key(kid); !errors.Is(err, gates.ErrUnknownKey) {
			t.Fatalf("Key(%q) = %v, want ErrUnknownKey", kid, err)
		}
	}
	if n := quietRequests.Load(); n != 1 {
		t.Fatalf("the JWKS URL was fetched %d times; want once, at start", n)
	}

	mu.Lock()
	serving = []gates.Key{second.PublicKey()}
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

	if _, err := gates.NewRemoteKeySet(srv.URL+"/missing\x00", gates.RemoteKeySetOptions{}); err == nil {
		t.Error("a bad URL was accepted")
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if _, err := gates.NewRemoteKeySet(down.URL, gates.RemoteKeySetOptions{Timeout: time.Second}); err == nil {
		t.Error("a JWKS URL that cannot be fetched at start was accepted")
	}
}
