package main

import (
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/axgate/axgate/token"
)

// startOIDCProvider runs a mock OpenID provider for the test and writes its
// client secret to a file, as --human-client-secret-file reads it.
func startOIDCProvider(t *testing.T) (op *mockoidc.MockOIDC, secretFile string) {
	t.Helper()
	op, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Shutdown() })
	return op, writeTestFile(t, t.TempDir(), "oidc-secret", op.Config().ClientSecret+"\n")
}

// writeDevKeyFile writes a new development signing key, as a private JWK
// with key id kid, to dir/name and returns its path.
func writeDevKeyFile(t *testing.T, dir, name, kid string) string {
	t.Helper()
	s, err := token.GenerateDevKey(kid)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := s.MarshalPrivateJWK()
	if err != nil {
		t.Fatal(err)
	}
	return writeTestFile(t, dir, name, string(jwk))
}
