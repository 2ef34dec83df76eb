package gates_test

import (
	"fmt"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/gates"
)

// A development key: its public JWK Set goes to the verifiers (a JWKS file
// or URL), and gates.Keyfunc verifies tokens it signed.
func ExampleGenerateDevKey() {
	signer, _ := gates.GenerateDevKey("dev-1")
	jwks, _ := signer.PublicJWKS()
	keys, _ := gates.ParseJWKS(jwks)

	token, _ := signer.Sign("JWT", jwt.RegisteredClaims{Subject: "alice"})
	parsed, err := jwt.Parse(token, gates.Keyfunc(keys))
	sub, _ := parsed.Claims.GetSubject()
	fmt.Println(signer.Algorithm(), sub, err)
	// Output: EdDSA alice <nil>
}
