package token_test

import (
	"fmt"
	"time"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// A confirmation token signed by an Issuer verifies with the matching
// Verifier, and its claims bind it to one call.
func Example() {
	dev, err := token.GenerateDevKey("dev-1")
	if err != nil {
		panic(err)
	}
	issuer := token.Issuer{Signer: dev}
	alice := middleware.Principal{ID: "alice", Tenant: "acme"}
	signed, _, err := issuer.Confirmation(alice, "order.cancel", "digest-of-the-arguments", time.Minute)
	if err != nil {
		panic(err)
	}

	keys, err := token.NewKeySet(dev.PublicKey())
	if err != nil {
		panic(err)
	}
	v, err := token.NewVerifier(token.VerifierConfig{
		Type:        token.TypConfirmation,
		Keys:        keys,
		MaxLifetime: token.DefaultConfirmationLifetime,
	})
	if err != nil {
		panic(err)
	}
	claims, err := v.Verify(signed)
	if err != nil {
		panic(err)
	}
	fmt.Println(claims.Subject, claims.Intent, claims.Tenant)

	// Another signature (one character of it changed) is refused.
	i := len(signed) - 10
	other := byte('A')
	if signed[i] == other {
		other = 'B'
	}
	_, err = v.Verify(signed[:i] + string(other) + signed[i+1:])
	fmt.Println(err != nil)
	// Output:
	// alice order.cancel acme
	// true
}
