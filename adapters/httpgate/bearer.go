package httpgate

import (
	"crypto"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// BearerConfig configures JWTBearer.
type BearerConfig struct {
	// Keyfunc returns the verification key of a token (required). Use
	// token.Keyfunc over a token.KeySet (static keys, a JWKS file or URL):
	// it binds each key to one algorithm and picks it by "kid".
	Keyfunc jwt.Keyfunc
	// Issuer is the required "iss" (required: a token from any issuer is
	// never accepted).
	Issuer string
	// Audience is the required "aud" (required).
	Audience string
	// Algorithms allowed in the "alg" header; default EdDSA, ES256, RS256.
	// "none" is never accepted.
	Algorithms []string
	// TenantClaim names the claim holding the caller's tenant (a string);
	// default "tenant".
	TenantClaim string
	// RolesClaim names the claim holding the caller's roles (an array of
	// strings, or one space-separated string); default "roles".
	RolesClaim string
	// ScopeClaim names the claim holding the granted scopes (a
	// space-separated string as in RFC 8693, or an array); default "scope".
	// A token without it yields Principal.Scopes == nil: no scope
	// restriction was stated, which is not the same as an empty grant.
	ScopeClaim string
	// Types are the accepted "typ" headers; default "", "JWT", "at+jwt" and
	// "application/at+jwt". Confirmation and approval tokens
	// (axag-confirmation+jwt, axag-approval+jwt) are always refused, so a
	// token minted for one call never authenticates a caller.
	Types []string
	// Leeway is the clock skew allowed on exp, nbf and iat; default 30s.
	Leeway time.Duration
	// MaxTokenBytes bounds a token before it is parsed; default 8 KiB.
	MaxTokenBytes int
	// CacheSize is how many verified tokens are remembered; default 4096.
	//
	// An agent presenting the same bearer token call after call then pays for
	// the signature once (an Ed25519 verification costs more than the whole
	// gate chain: bench/README.md, sections "Confirmation gate vs bare
	// golang-jwt" and "Policy chain"). A remembered token is only ever the exact
	// same string, and is dropped once its exp (plus Leeway) has passed or
	// once Keyfunc no longer returns the key it was verified with (a key
	// revoked from the key set: the Keyfunc is asked again on every hit,
	// which for token.Keyfunc is a lookup in memory). Negative disables the
	// cache.
	CacheSize int
}

// Defaults of BearerConfig.
const (
	defaultBearerLeeway  = 30 * time.Second
	defaultMaxTokenBytes = 8 << 10
	defaultBearerCache   = 4096
	defaultTenantClaim   = "tenant"
	defaultRolesClaim    = "roles"
	defaultScopeClaim    = "scope"
)

var forbiddenTypes = []string{"axag-confirmation+jwt", "axag-approval+jwt"}

// JWTBearer returns a PrincipalFunc that authenticates bearer JWTs.
//
// The token is the "Authorization: Bearer <JWT>" header, verified with
// golang-jwt v5: the algorithm must be allowed, the signature valid, "iss"
// and "aud" must match, "exp" is required, "sub" must be non-empty, and a
// "crit" header is refused (golang-jwt does not understand any). The
// principal is sub, the tenant, roles and scope claims, and all the claims.
//
// A missing or bad token is refused with 401 AXGATE_UNAUTHENTICATED, a
// details.reason (missing_token or bad_claim, or the token.Reason of a
// refused token: too_large, malformed, expired, not_yet_valid,
// bad_signature, unknown_key, algorithm_not_allowed, wrong_issuer,
// wrong_audience, wrong_type, unsupported_critical_header, missing_claim)
// and a WWW-Authenticate: Bearer challenge. No key material or token
// content is echoed.
func JWTBearer(cfg BearerConfig) (PrincipalFunc, error) {
	if cfg.Keyfunc == nil {
		return nil, errors.New("httpgate: JWTBearer needs a Keyfunc")
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("httpgate: JWTBearer needs an Issuer and an Audience")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = token.DefaultAlgorithms
	}
	if slices.Contains(cfg.Algorithms, "none") {
		return nil, errors.New(`httpgate: JWTBearer never accepts alg "none"`)
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = defaultTenantClaim
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = defaultRolesClaim
	}
	if cfg.ScopeClaim == "" {
		cfg.ScopeClaim = defaultScopeClaim
	}
	if cfg.Types == nil {
		cfg.Types = []string{"", "JWT", "at+jwt", "application/at+jwt"}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = defaultBearerLeeway
	}
	if cfg.MaxTokenBytes == 0 {
		cfg.MaxTokenBytes = defaultMaxTokenBytes
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = defaultBearerCache
	}
	b := &bearer{cfg: cfg, parser: jwt.NewParser(
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
	)}
	if cfg.CacheSize > 0 {
		b.cache = make(map[string]verified, min(cfg.CacheSize, 1024))
	}
	return b.principal, nil
}

type bearer struct {
	cfg    BearerConfig
	parser *jwt.Parser

	mu    sync.RWMutex
	cache map[string]verified // raw token → what it verified to
}

// verified is a token that passed every check, until it expires or its key
// leaves the key set.
type verified struct {
	p   middleware.Principal
	exp time.Time
	// token is the parsed header and method, for asking the Keyfunc again
	// on a hit; key is the key the signature was verified with.
	token *jwt.Token
	key   any
}

var (
	errTypeRefused = errors.New("httpgate: token type refused")
	errCrit        = errors.New("httpgate: crit header refused")
)

func (b *bearer) principal(r *http.Request) (middleware.Principal, error) {
	raw, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return middleware.Principal{}, unauthenticated(reasons.MissingToken, "the request has no bearer token")
	}
	if len(raw) > b.cfg.MaxTokenBytes {
		return middleware.Principal{}, unauthenticated(axerr.Reason(reasons.TokenTooLarge), "the bearer token is too large")
	}
	if p, ok := b.cached(raw); ok {
		return p, nil
	}
	claims := jwt.MapClaims{}
	var key any
	tok, err := b.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		k, err := b.keyfunc(t)
		key = k
		return k, err
	})
	if err != nil {
		reason := jwtReason(err)
		if reason == reasons.TokenAudience {
			// The audience is the server's public name, not a secret: say
			// which one a token must name.
			return middleware.Principal{}, unauthenticated(axerr.Reason(reason),
				fmt.Sprintf("the bearer token is not valid (wrong audience): this server accepts only tokens whose aud names %q", b.cfg.Audience)).
				With("expected_audience", b.cfg.Audience).WithCause(err)
		}
		return middleware.Principal{}, unauthenticated(axerr.Reason(reason), "the bearer token is not valid ("+strings.ReplaceAll(string(reason), "_", " ")+")").WithCause(err)
	}
	p := middleware.Principal{Claims: claims}
	if p.ID, ok = claims["sub"].(string); !ok || p.ID == "" {
		return middleware.Principal{}, unauthenticated(axerr.Reason(reasons.TokenMissingClaim), "the bearer token names no subject (sub)")
	}
	if v, ok := claims[b.cfg.TenantClaim]; ok {
		if p.Tenant, ok = v.(string); !ok {
			return middleware.Principal{}, badClaim(b.cfg.TenantClaim)
		}
	}
	if v, ok := claims[b.cfg.RolesClaim]; ok {
		if p.Roles, ok = stringList(v); !ok {
			return middleware.Principal{}, badClaim(b.cfg.RolesClaim)
		}
	}
	if v, ok := claims[b.cfg.ScopeClaim]; ok {
		if p.Scopes, ok = stringList(v); !ok {
			return middleware.Principal{}, badClaim(b.cfg.ScopeClaim)
		}
		if p.Scopes == nil {
			p.Scopes = []string{} // stated, and empty: grants nothing
		}
	}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil && sameKey(key, key) {
		// Only a key that can be compared is remembered: a hit must be
		// able to tell that the key set still holds it.
		b.remember(raw, verified{p: p, exp: exp.Time, token: &jwt.Token{Header: tok.Header, Method: tok.Method}, key: key})
	}
	return p, nil
}

// cached returns the principal of a token verified before, not expired
// since, and whose key the key set still holds. The Keyfunc is asked again
// on every hit (a lookup in memory: token.KeySet never fetches on the
// request path), so that a key revoked or rotated out of a remote key set
// stops its tokens at the next refresh rather than at their exp. The
// principal is shared by every request with that token: gates read it,
// never change it.
func (b *bearer) cached(raw string) (middleware.Principal, bool) {
	if b.cache == nil {
		return middleware.Principal{}, false
	}
	b.mu.RLock()
	v, ok := b.cache[raw]
	b.mu.RUnlock()
	if !ok {
		return middleware.Principal{}, false
	}
	if time.Now().After(v.exp.Add(b.cfg.Leeway)) || !b.keyStillValid(v) {
		b.mu.Lock()
		delete(b.cache, raw)
		b.mu.Unlock()
		return middleware.Principal{}, false // parsed again, refused as expired
	}
	return v.p, true
}

// keyStillValid asks the Keyfunc for the key of a remembered token again and
// reports whether it is still the key the token was verified with.
func (b *bearer) keyStillValid(v verified) bool {
	k, err := b.cfg.Keyfunc(v.token)
	return err == nil && sameKey(v.key, k)
}

// sameKey reports whether two verification keys are the same key: public
// keys by their Equal method (ed25519, ecdsa, rsa), HMAC secrets by their
// bytes. Any other kind of key is never the same, so it is not cached.
func sameKey(a, b any) bool {
	switch k := a.(type) {
	case interface{ Equal(crypto.PublicKey) bool }:
		return k.Equal(b)
	case []byte:
		other, ok := b.([]byte)
		return ok && len(k) > 0 && subtle.ConstantTimeCompare(k, other) == 1
	}
	return false
}

func (b *bearer) remember(raw string, v verified) {
	if b.cache == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.cache) >= b.cfg.CacheSize {
		// Full: forget an arbitrary entry (map order is random), which
		// bounds memory without bookkeeping on the hot path.
		for k := range b.cache {
			delete(b.cache, k)
			break
		}
	}
	b.cache[raw] = v
}

// keyfunc checks the headers golang-jwt leaves alone, then asks the
// configured Keyfunc.
func (b *bearer) keyfunc(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCrit
	}
	typ := ""
	if v, ok := t.Header["typ"]; ok {
		s, isString := v.(string)
		if !isString {
			return nil, errTypeRefused
		}
		typ = s
	}
	if slices.Contains(forbiddenTypes, strings.ToLower(typ)) || !slices.ContainsFunc(b.cfg.Types, func(s string) bool { return strings.EqualFold(s, typ) }) {
		return nil, errTypeRefused
	}
	return b.cfg.Keyfunc(t)
}

func bearerToken(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	t := strings.TrimSpace(h[len(scheme):])
	return t, t != ""
}

// jwtReason names why a token was refused, in the vocabulary of the token
// gates (token.Reason).
func jwtReason(err error) token.Reason {
	if te, ok := errors.AsType[*token.Error](err); ok {
		return te.Reason
	}
	switch {
	case errors.Is(err, errCrit):
		return reasons.TokenCriticalHeader
	case errors.Is(err, errTypeRefused):
		return reasons.TokenType
	case errors.Is(err, token.ErrUnknownKey):
		return reasons.TokenUnknownKey
	case errors.Is(err, jwt.ErrTokenExpired):
		return reasons.TokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return reasons.TokenNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return reasons.TokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return reasons.TokenAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return reasons.TokenMissingClaim
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return reasons.TokenBadSignature
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return reasons.TokenUnknownKey
	}
	return reasons.TokenMalformed
}

// stringList reads an array of strings or a space-separated string.
func stringList(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return strings.Fields(t), true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// unauthenticated is a 401 refusal; a refused token's token.Reason is
// converted to its details.reason as it is (axerr.Reason(r)).
func unauthenticated(reason axerr.Reason, msg string) *axerr.Error {
	return axerr.New(axerr.CodeUnauthenticated, msg).WithReason(reason)
}

func badClaim(name string) *axerr.Error {
	return unauthenticated(reasons.BadClaim, fmt.Sprintf("the bearer token's %q claim has the wrong type", name))
}

// bearerChallenge is the WWW-Authenticate value of a 401 (RFC 6750): a plain
// challenge when no token came (or no authentication is configured),
// invalid_token when one did and was refused, and none ("") when what
// failed is not bearer authentication (a PrincipalFunc that checks an API
// key, say): a Bearer challenge would send the client looking for a token
// the service does not take.
func bearerChallenge(e *axerr.Error) string {
	reason, _ := e.Details["reason"].(string)
	switch {
	case reason == string(reasons.MissingToken) || reason == string(reasons.NoAuthenticator):
		return `Bearer realm="axgate"`
	case reason == string(reasons.BadClaim) || bearerReasons[token.Reason(reason)]:
		return `Bearer realm="axgate", error="invalid_token"`
	}
	return ""
}

// bearerReasons are the reasons JWTBearer refuses a token with.
var bearerReasons = map[token.Reason]bool{
	reasons.TokenTooLarge: true, reasons.TokenMalformed: true, reasons.TokenType: true, reasons.TokenAlgorithm: true,
	reasons.TokenCriticalHeader: true, reasons.TokenUnknownKey: true, reasons.TokenBadSignature: true,
	reasons.TokenMissingClaim: true, reasons.TokenExpired: true, reasons.TokenNotYetValid: true,
	reasons.TokenIssuedInFuture: true, reasons.TokenLifetime: true, reasons.TokenIssuer: true, reasons.TokenAudience: true,
}
