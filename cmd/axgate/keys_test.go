package main

import (
	"crypto"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

func TestKeysAndTokens(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"EdDSA", "ES256", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			stdout, stderr, code := cli(t, nil, "keys", "gen", "--alg", alg, "--out", dir)
			if code != exitOK {
				t.Fatalf("keys gen: exit %d: %s", code, stderr)
			}
			keyPath, jwksPath := filepath.Join(dir, privateKeyFile), filepath.Join(dir, publicJWKSFile)
			st, err := os.Stat(keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
			}
			keys, err := token.LoadJWKSFile(jwksPath)
			if err != nil {
				t.Fatalf("the JWKS does not load: %v", err)
			}
			pub := keys.Keys()
			if len(pub) != 1 || pub[0].Algorithm != alg || !strings.Contains(stdout, pub[0].ID) {
				t.Fatalf("JWKS keys %+v, output %s", pub, stdout)
			}
			// The kid is the RFC 7638 thumbprint, as another library
			// computes it.
			tp, err := (&jose.JSONWebKey{Key: pub[0].Public}).Thumbprint(crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if want := base64.RawURLEncoding.EncodeToString(tp); pub[0].ID != want {
				t.Errorf("kid %s, RFC 7638 thumbprint %s", pub[0].ID, want)
			}

			// A second run refuses to overwrite the key.
			if _, stderr, code := cli(t, nil, "keys", "gen", "--out", dir); code != exitFail || !strings.Contains(stderr, "--force") {
				t.Errorf("overwrite without --force: exit %d %s", code, stderr)
			}

			args := `{"quantity": 2, "product_id": "p-1"}`
			reordered := `{"product_id":"p-1","quantity":2.0}`
			digest, err := middleware.NewCall("cart_add_item", []byte(reordered), middleware.Principal{}).ArgsSHA256()
			if err != nil {
				t.Fatal(err)
			}

			conf := mint(t, "confirmation", "--key", keyPath, "--sub", "alice", "--tenant", "acme", "--intent", "cart.add_item", "--args", args)
			v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: keys, MaxLifetime: token.DefaultConfirmationLifetime})
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Verify(conf)
			if err != nil {
				t.Fatalf("confirmation token does not verify: %v", err)
			}
			if c.Subject != "alice" || c.Tenant != "acme" || c.Intent != "cart.add_item" || c.ArgsSHA256 != digest || c.ID == "" {
				t.Errorf("confirmation claims %+v (want args_sha256 %s)", c, digest)
			}

			argsFile := filepath.Join(dir, "args.json")
			if err := os.WriteFile(argsFile, []byte(args), 0o644); err != nil {
				t.Fatal(err)
			}
			appr := mint(t, "approval", "--key", keyPath, "--sub", "bob", "--roles", "admin, finance", "--requester", "alice",
				"--intent", "cart.add_item", "--args-file", argsFile, "--ttl", "30m")
			v, err = token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: keys, MaxLifetime: token.DefaultApprovalLifetime})
			if err != nil {
				t.Fatal(err)
			}
			a, err := v.Verify(appr)
			if err != nil {
				t.Fatalf("approval token does not verify: %v", err)
			}
			if a.Subject != "bob" || a.Requester != "alice" || strings.Join(a.Roles, ",") != "admin,finance" || a.ArgsSHA256 != digest {
				t.Errorf("approval claims %+v", a)
			}
			if life := a.ExpiresAt.Sub(a.IssuedAt.Time); life != 30*time.Minute {
				t.Errorf("approval lives %v, want 30m", life)
			}
			// A confirmation verifier refuses an approval token: the typ
			// header tells them apart.
			if _, err := (must(token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: keys, MaxLifetime: time.Hour}))).Verify(appr); err == nil {
				t.Error("an approval token passed as a confirmation")
			}

			bearer := mint(t, "principal", "--key", keyPath, "--sub", "alice", "--tenant", "acme", "--roles", "buyer", "--scope", "cart:write  orders:read")
			var pc principalClaims
			if _, err := jwt.ParseWithClaims(bearer, &pc, token.Keyfunc(keys), jwt.WithExpirationRequired(), jwt.WithIssuer("axgate"), jwt.WithAudience("axgate")); err != nil {
				t.Fatalf("principal token does not verify: %v", err)
			}
			if pc.Subject != "alice" || pc.Tenant != "acme" || pc.Scope != "cart:write orders:read" || len(pc.Roles) != 1 {
				t.Errorf("principal claims %+v", pc)
			}
		})
	}
}

func TestTokenUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, stderr, code := cli(t, nil, "keys", "gen", "--out", dir); code != exitOK {
		t.Fatal(stderr)
	}
	key := filepath.Join(dir, privateKeyFile)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"token", "refresh"}, "unknown token kind"},
		{[]string{"token", "confirmation", "--key", key, "--sub", "a", "--args", "{}"}, "--intent is required"},
		{[]string{"token", "confirmation", "--key", key, "--sub", "a", "--intent", "x.y"}, "exactly one of --args or --args-file"},
		{[]string{"token", "confirmation", "--key", key, "--sub", "a", "--intent", "x.y", "--args", "{"}, "not valid JSON"},
		{[]string{"token", "confirmation", "--key", key, "--sub", "a", "--intent", "x.y", "--args", "[1]"}, "JSON object"},
		{[]string{"token", "approval", "--key", key, "--sub", "b", "--intent", "x.y", "--args", "{}", "--roles", "admin"}, "--requester is required"},
		{[]string{"token", "principal", "--sub", "a"}, "--key is required"},
		{[]string{"keys", "gen", "--alg", "HS256", "--out", dir}, "--alg must be"},
		{[]string{"keys", "gen"}, "--out DIR is required"},
	}
	for _, c := range cases {
		_, stderr, code := cli(t, nil, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if _, stderr, code := cli(t, nil, "token", "principal", "--key", filepath.Join(dir, "missing.pem"), "--sub", "a"); code != exitUsage || !strings.Contains(stderr, "--key ") {
		t.Errorf("missing key file: exit %d %s; want %d naming --key", code, stderr, exitUsage)
	}
	stdout, _, code := cli(t, nil, "token", "-h")
	if code != exitOK || !strings.Contains(stdout, "for tests and demos") {
		t.Errorf("token -h does not say the tokens are for tests and demos: %s", stdout)
	}
}

func mint(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := cli(t, nil, append([]string{"token"}, args...)...)
	if code != exitOK {
		t.Fatalf("token %v: exit %d: %s", args, code, stderr)
	}
	return strings.TrimSpace(stdout)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
