package gate_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// TestGoJoseTokensAccepted mints tokens with another JOSE library, from the
// documented claims only, and checks that the gate accepts them.
func TestGoJoseTokensAccepted(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey := tkRSAKey(t)
	keys, err := token.NewKeySet(
		token.Key{ID: "ed", Algorithm: "EdDSA", Public: edKey.Public()},
		token.Key{ID: "ec", Algorithm: "ES256", Public: &ecKey.PublicKey},
		token.Key{ID: "rsa", Algorithm: "RS256", Public: &rsaKey.PublicKey},
	)
	if err != nil {
		t.Fatal(err)
	}
	f := newTkFixture(t)
	v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: keys, Issuer: "shop-ui", Audience: "shop-api", MaxLifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: v, Replay: f.replay})
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
				(&jose.SignerOptions{}).WithType(token.TypConfirmation).WithHeader("kid", tc.kid))
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
