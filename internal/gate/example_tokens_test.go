package gate_test

import (
	"fmt"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/token"
)

// A development key: its public JWK Set goes to the verifiers (a JWKS file
// or URL), and token.Keyfunc verifies tokens it signed.
func ExampleGenerateDevKey() {
	signer, _ := token.GenerateDevKey("dev-1")
	jwks, _ := signer.PublicJWKS()
	keys, _ := token.ParseJWKS(jwks)

	tok, _ := signer.Sign("JWT", jwt.RegisteredClaims{Subject: "alice"})
	parsed, err := jwt.Parse(tok, token.Keyfunc(keys))
	sub, _ := parsed.Claims.GetSubject()
	fmt.Println(signer.Algorithm(), sub, err)
	// Output: EdDSA alice <nil>
}
