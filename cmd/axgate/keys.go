package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/gowebpki/jcs"

	"github.com/axgate/axgate/token"
)

// File names keys gen writes in --out.
const (
	privateKeyFile = "signing-key.pem"
	publicJWKSFile = "jwks.json"
)

const keysAbout = `
Generates a signing key for confirmation, approval and (in development)
principal tokens:

  DIR/signing-key.pem  the private key, PKCS #8 PEM, mode 0600: keep it secret
  DIR/jwks.json        its public JWK Set (kid, alg, use "sig"): give it to the
                       gateway (axgate serve --jwks DIR/jwks.json, or
                       axgate.WithJWKSFile) so that it verifies the tokens

The kid is the key's RFC 7638 thumbprint, so "axgate token --key" finds the
same kid from the private key alone. Existing files are not overwritten
without --force.`

func runKeys(_ context.Context, e *env, args []string) int {
	if len(args) == 0 || (args[0] != "gen" && args[0] != "-h" && args[0] != "-help" && args[0] != "--help") {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(e.stderr, "axgate keys: unknown subcommand %q%s\n", args[0], hint(args[0], []string{"gen"}))
		}
		fmt.Fprintln(e.stderr, "Usage: axgate keys gen [--alg EdDSA|ES256|RS256] --out DIR")
		return exitUsage
	}
	if args[0] == "gen" {
		args = args[1:]
	}
	fs := newFlags(e, "keys", "keys gen [--alg EdDSA|ES256|RS256] --out DIR [--force]", keysAbout)
	alg := fs.String("alg", token.AlgEdDSA, "signature algorithm: EdDSA (Ed25519), ES256 (ECDSA P-256) or RS256 (RSA 3072)")
	out := fs.String("out", "", "directory to write the key and the JWKS to (created if missing)")
	force := fs.Bool("force", false, "overwrite existing files")
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	if len(pos) > 0 {
		return usageError(e, fs, "unexpected argument %q", pos[0])
	}
	if *out == "" {
		return usageError(e, fs, "--out DIR is required")
	}
	if !oneOf(*alg, token.AlgEdDSA, token.AlgES256, token.AlgRS256) {
		return usageError(e, fs, "--alg must be EdDSA, ES256 or RS256, not %q", *alg)
	}
	priv, err := generateKey(*alg)
	if err != nil {
		return failf(e, "keys", "%v", err)
	}
	kid, err := keyID(priv)
	if err != nil {
		return failf(e, "keys", "%v", err)
	}
	signer, err := token.NewSigner(kid, priv)
	if err != nil {
		return failf(e, "keys", "%v", err)
	}
	jwks, err := signer.PublicJWKS()
	if err != nil {
		return failf(e, "keys", "%v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return failf(e, "keys", "%v", err)
	}
	keyPath, jwksPath := filepath.Join(*out, privateKeyFile), filepath.Join(*out, publicJWKSFile)
	if !*force {
		for _, p := range []string{keyPath, jwksPath} {
			if _, err := os.Stat(p); err == nil {
				return failf(e, "keys", "%s exists; use --force to replace it", p)
			}
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return failf(e, "keys", "%v", err)
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return failf(e, "keys", "%v", err)
	}
	if err := writeFile(jwksPath, append(jwks, '\n'), 0o644); err != nil {
		return failf(e, "keys", "%v", err)
	}
	fmt.Fprintf(e.stdout, "kid  %s\nalg  %s\nkey  %s (private, mode 0600)\njwks %s (public)\n", kid, *alg, keyPath, jwksPath)
	return exitOK
}

// writeFile writes data with exactly mode perm, also when the file existed
// with a wider mode (os.WriteFile keeps an existing file's mode).
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

func generateKey(alg string) (any, error) {
	switch alg {
	case token.AlgEdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case token.AlgES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case token.AlgRS256:
		return rsa.GenerateKey(rand.Reader, 3072)
	}
	return nil, fmt.Errorf("unsupported algorithm %q", alg)
}

// keyID returns the RFC 7638 thumbprint of a key's public half: the SHA-256
// of the JCS-canonical JSON of its required JWK members, base64url.
func keyID(key any) (string, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		key = k.Public()
	case *ecdsa.PrivateKey:
		key = &k.PublicKey
	case *rsa.PrivateKey:
		key = &k.PublicKey
	}
	jwk, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{})
	if err != nil {
		return "", err
	}
	m := jwk.Marshal()
	var members map[string]string
	switch m.KTY {
	case jwkset.KtyOKP:
		members = map[string]string{"crv": m.CRV.String(), "kty": m.KTY.String(), "x": m.X}
	case jwkset.KtyEC:
		members = map[string]string{"crv": m.CRV.String(), "kty": m.KTY.String(), "x": m.X, "y": m.Y}
	case jwkset.KtyRSA:
		members = map[string]string{"e": m.E, "kty": m.KTY.String(), "n": m.N}
	default:
		return "", errors.New("no thumbprint for this key type")
	}
	raw, err := json.Marshal(members)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
