package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const tokenAbout = `
Mints DEVELOPMENT tokens, for tests and demos: in production a person's
confirmation or approval comes from the host's UI (Enforcer.IssueConfirmation,
Enforcer.Approvals().Decide) and the principal's token from your identity provider.

  principal     a bearer token for Authorization: Bearer …
                claims: iss, aud, sub, tenant, roles, scope (space-separated),
                iat, exp, jti
  confirmation  typ axag-confirmation+jwt, for the X-AXAG-Confirmation header
                claims: iss, aud, sub (the caller), tenant, intent,
                args_sha256, iat, exp, jti
  approval      typ axag-approval+jwt, for the X-AXAG-Approval header
                claims: iss, aud, sub (the approver), roles (the approver's),
                requester (the caller), tenant, intent, args_sha256, iat,
                exp, jti

args_sha256 is the base64url (unpadded) SHA-256 of the arguments in RFC 8785
(JCS) canonical form: pass the arguments exactly as the call will carry them
(key order and white space do not matter). The token is printed on stdout.`

func runToken(_ context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "Usage: axgate token principal|confirmation|approval --key KEY … (for tests and demos)")
		return exitUsage
	}
	kind := args[0]
	// help lists every flag of every kind, each saying which kinds take it,
	// so that "axgate help token" shows the flags a kind needs.
	help := false
	switch kind {
	case "-h", "-help", "--help":
		kind, help = "principal|confirmation|approval", true
	case "principal", "confirmation", "approval":
		args = args[1:]
	default:
		fmt.Fprintf(e.stderr, "axgate token: unknown token kind %q%s\n", kind, hint(kind, []string{"principal", "confirmation", "approval"}))
		return exitUsage
	}
	fs := newFlags(e, "token", "token "+kind+" --key KEY [flags]   (development tokens, for tests and demos)", tokenAbout)
	key := fs.String("key", "", "private signing key: PEM (as axgate keys gen writes) or private JWK")
	kid := fs.String("kid", "", "key id for the header (default: the key's own kid, else its RFC 7638 thumbprint)")
	iss := fs.String("iss", token.DefaultIssuer, "issuer (iss)")
	aud := fs.String("aud", token.DefaultAudience, "audience (aud)")
	sub := fs.String("sub", "", "subject: the caller (principal, confirmation) or the approver (approval)")
	tenant := fs.String("tenant", "", "the caller's tenant, if it has one")
	ttl := fs.Duration("ttl", 0, "lifetime (default: principal 1h, confirmation 5m, approval 1h)")
	var roles, scope, intent, argsJSON, argsFile, requester *string
	// takes reports whether this kind takes a flag that the kinds named
	// take; in help, every flag is listed with those kinds in its usage.
	takes := func(usage string, kinds ...string) (bool, string) {
		if help {
			return true, usage + " (" + strings.Join(kinds, ", ") + ")"
		}
		for _, k := range kinds {
			if k == kind {
				return true, usage
			}
		}
		return false, ""
	}
	if ok, u := takes("comma-separated roles (principal: the caller's; approval: the approver's)", "principal", "approval"); ok {
		roles = fs.String("roles", "", u)
	}
	if ok, u := takes("granted scopes, space-separated", "principal"); ok {
		scope = fs.String("scope", "", u)
	}
	if ok, u := takes("the manifest intent of the call, e.g. order.place", "confirmation", "approval"); ok {
		intent = fs.String("intent", "", u)
	}
	if ok, u := takes("the call's arguments as a JSON object", "confirmation", "approval"); ok {
		argsJSON = fs.String("args", "", u)
	}
	if ok, u := takes("read the call's arguments from this file (- for stdin is not supported)", "confirmation", "approval"); ok {
		argsFile = fs.String("args-file", "", u)
	}
	if ok, u := takes("the caller whose call is approved", "approval"); ok {
		requester = fs.String("requester", "", u)
	}
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	if len(pos) > 0 {
		return usageError(e, fs, "unexpected argument %q", pos[0])
	}
	// need checks flag-name, value pairs for missing values.
	need := func(pairs ...string) int {
		for i := 0; i+1 < len(pairs); i += 2 {
			if pairs[i+1] == "" {
				return usageError(e, fs, "--%s is required", pairs[i])
			}
		}
		return exitOK
	}
	if code := need("key", *key, "sub", *sub); code != exitOK {
		return code
	}
	if *ttl < 0 {
		return usageError(e, fs, "--ttl must be positive")
	}
	if err := fileFlag("key", *key); err != nil {
		return fileError(e, "token", err)
	}
	signer, err := loadSigner(*key, *kid)
	if err != nil {
		return failf(e, "token", "--key %v", err) // the error begins with the path
	}
	now := time.Now()
	jti, err := newJTI()
	if err != nil {
		return failf(e, "token", "%v", err)
	}
	life := func(d time.Duration) time.Duration {
		if *ttl > 0 {
			return *ttl
		}
		return d
	}
	registered := func(d time.Duration) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{
			Issuer: *iss, Subject: *sub, Audience: jwt.ClaimStrings{*aud}, ID: jti,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(life(d))),
		}
	}

	var signed string
	switch kind {
	case "principal":
		c := principalClaims{RegisteredClaims: registered(time.Hour), Tenant: *tenant, Roles: splitList(*roles), Scope: strings.Join(strings.Fields(*scope), " ")}
		signed, err = signer.Sign("JWT", c)
	case "confirmation", "approval":
		if code := need("intent", *intent); code != exitOK {
			return code
		}
		digest, code := argsDigest(e, fs, *argsJSON, *argsFile)
		if code != exitOK {
			return code
		}
		c := token.Claims{Intent: *intent, Tenant: *tenant, ArgsSHA256: digest}
		typ := token.TypConfirmation
		if kind == "confirmation" {
			c.RegisteredClaims = registered(token.DefaultConfirmationLifetime)
		} else {
			if code := need("requester", *requester, "roles", *roles); code != exitOK {
				return code
			}
			typ = token.TypApproval
			c.RegisteredClaims = registered(time.Hour)
			c.Roles, c.Requester = splitList(*roles), *requester
		}
		signed, err = signer.Sign(typ, c)
	}
	if err != nil {
		return failf(e, "token", "%v", err)
	}
	fmt.Fprintln(e.stdout, signed)
	return exitOK
}

// principalClaims are the claims of a development bearer token.
type principalClaims struct {
	jwt.RegisteredClaims
	Tenant string   `json:"tenant,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	// Scope is the granted scopes, space-separated (RFC 8693 §4.2).
	Scope string `json:"scope,omitempty"`
}

// loadSigner reads a private key; its kid is the one given, else the key
// file's own (a JWK's), else the key's thumbprint, as keys gen names it.
func loadSigner(path, kid string) (*token.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // begins with the path
	}
	s, err := token.ParseSigningKey(data, kid)
	if err == nil && s.KeyID() == "" {
		if kid, err = keyID(s.PublicKey().Public); err == nil {
			s, err = token.ParseSigningKey(data, kid)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// loadJWKS reads a JWK Set file; its errors begin with the path.
func loadJWKS(path string) (*token.StaticKeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ks, err := token.ParseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ks, nil
}

// argsDigest returns args_sha256 of the arguments given by --args or
// --args-file, computed the way the gates compute it for a call.
func argsDigest(e *env, fs *flag.FlagSet, inline, file string) (string, int) {
	if (inline == "") == (file == "") {
		return "", usageError(e, fs, "give the call's arguments with exactly one of --args or --args-file")
	}
	raw := []byte(inline)
	if file != "" {
		var err error
		if raw, err = os.ReadFile(file); err != nil {
			return "", usageError(e, fs, "%v", err)
		}
	}
	if !json.Valid(raw) {
		return "", usageError(e, fs, "the arguments are not valid JSON")
	}
	digest, err := middleware.NewCall("", raw, middleware.Principal{}).ArgsSHA256()
	if err != nil {
		return "", usageError(e, fs, "the arguments: %v", err)
	}
	return digest, exitOK
}

func splitList(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// newJTI returns a random token id (128 bits, base64url).
func newJTI() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
