package token

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/middleware"
)

// Token types: the "typ" header of each kind of token (RFC 8725 §3.11), so
// that one kind can never be presented as the other.
const (
	TypConfirmation = "axag-confirmation+jwt"
	TypApproval     = "axag-approval+jwt"
)

// Token defaults.
const (
	// DefaultConfirmationLifetime is the longest a confirmation token may
	// live (exp - iat).
	DefaultConfirmationLifetime = 5 * time.Minute
	// DefaultApprovalLifetime is the longest an approval token may live.
	DefaultApprovalLifetime = 24 * time.Hour
	// defaultLeeway is the clock skew allowed on exp, nbf and iat.
	defaultLeeway = 30 * time.Second
	// DefaultMaxTokenBytes caps a token's size; larger tokens are refused
	// before parsing.
	defaultMaxBytes = 8 << 10
	// DefaultIssuer and DefaultAudience are the iss and aud of tokens when
	// the configuration names none.
	DefaultIssuer   = "axgate"
	DefaultAudience = "axgate"
)

// Claims are the claims of confirmation and approval tokens. The JSON names
// are the public contract (see docs/tokens.md); they bind a token to one call.
type Claims struct {
	// iss, sub, aud, exp, nbf, iat, jti. For a confirmation, sub is the
	// caller's principal id; for an approval, the approver's id.
	jwt.RegisteredClaims
	// Intent is the manifest intent of the call.
	Intent string `json:"intent"`
	// Tenant is the caller's tenant, absent when the caller has none.
	Tenant string `json:"tenant,omitempty"`
	// ArgsSHA256 is the base64url (unpadded) SHA-256 of the arguments
	// canonicalized with RFC 8785 (JCS).
	ArgsSHA256 string `json:"args_sha256"`
	// Roles are the approver's roles (approval only).
	Roles []string `json:"roles,omitempty"`
	// Requester is the caller's principal id (approval only).
	Requester string `json:"requester,omitempty"`
}

// Reason says why a token was refused. It is safe to show: it never carries
// key material. The reasons are wire strings, listed in the token reason
// table of docs/errors.md ("expired", "already_used", …): compare
// Error.Reason with the string.
type Reason string

var reasonText = map[Reason]string{
	reasons.TokenTooLarge:          "is too large",
	reasons.TokenMalformed:         "is not a well-formed JWT",
	reasons.TokenType:              "has the wrong type (typ header)",
	reasons.TokenAlgorithm:         "uses an algorithm that is not allowed for its key",
	reasons.TokenCriticalHeader:    "names a critical header extension that is not supported",
	reasons.TokenUnknownKey:        "is signed with an unknown key",
	reasons.TokenBadSignature:      "has a signature that does not verify",
	reasons.TokenMissingClaim:      "lacks a required claim",
	reasons.TokenExpired:           "has expired",
	reasons.TokenNotYetValid:       "is not valid yet",
	reasons.TokenIssuedInFuture:    "was issued in the future",
	reasons.TokenLifetime:          "lives longer than allowed",
	reasons.TokenIssuer:            "comes from another issuer",
	reasons.TokenAudience:          "is meant for another audience",
	reasons.TokenUsed:              "was already used",
	reasons.TokenOtherArguments:    "was issued for other arguments",
	reasons.TokenOtherIntent:       "was issued for another action",
	reasons.TokenOtherCaller:       "was issued for another caller",
	reasons.TokenOtherTenant:       "was issued for another tenant",
	reasons.TokenVoid:              "was issued before a denial or an earlier run of the call",
	reasons.TokenIssuedBeforeStart: "was issued before the gateway last started: without a persistent replay store (Redis), a restart voids outstanding tokens",
}

// Describe returns the reason as the end of a sentence ("has expired").
func (r Reason) Describe() string {
	if s, ok := reasonText[r]; ok {
		return s
	}
	return "is not valid"
}

// TokenError is a refused token. Err, when set, is the underlying cause, for
// logs only.
type Error struct {
	Reason Reason
	// Claim names the missing claim for reasons.TokenMissingClaim.
	Claim string
	Err   error
}

func newError(r Reason, err error) *Error { return &Error{Reason: r, Err: err} }

// Error implements error.
func (e *Error) Error() string {
	s := "token " + e.Reason.Describe()
	if e.Claim != "" {
		s += " (" + e.Claim + ")"
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CheckBinding checks that verified claims were issued for this call: its
// arguments (digest is the call's args_sha256), its intent, its caller
// (caller is the claim naming them: sub of a confirmation, requester of an
// approval) and its tenant.
func (c *Claims) CheckBinding(caller string, call *middleware.Call, digest string) *Error {
	p := call.Principal
	switch {
	case c.ArgsSHA256 != digest:
		return newError(reasons.TokenOtherArguments, nil)
	case c.Intent != call.Intent():
		return newError(reasons.TokenOtherIntent, nil)
	case caller != p.ID:
		return newError(reasons.TokenOtherCaller, nil)
	case c.Tenant != p.Tenant:
		return newError(reasons.TokenOtherTenant, nil)
	}
	return nil
}

// VerifierConfig configures a Verifier for one kind of token.
type VerifierConfig struct {
	// Type is the required "typ" header (TypConfirmation or TypApproval).
	Type string
	// Keys are the verification keys. Required.
	Keys KeySet
	// Issuer is the required iss (DefaultIssuer when empty).
	Issuer string
	// Audience must be among the aud values (DefaultAudience when empty).
	Audience string
	// Algorithms is the allow-list (DefaultAlgorithms when empty). "none"
	// is never accepted.
	Algorithms []string
	// MaxLifetime bounds exp - iat. Required.
	MaxLifetime time.Duration
	// Leeway is the clock skew allowed (30s when zero; negative
	// means none).
	Leeway time.Duration
	// MaxBytes caps the token size (DefaultMaxTokenBytes when zero).
	MaxBytes int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Verifier verifies tokens of one kind with golang-jwt v5 and the rules of RFC 8725.
//
// Those rules are: a size cap before parsing, algorithm allow-list with each
// key bound to one algorithm, no critical extensions, exact typ, iss and aud,
// required jti, iat and exp, bounded lifetime and a small leeway. It does not
// check the call binding or single use: the gates do. It is safe for
// concurrent use.
type Verifier struct {
	cfg     VerifierConfig
	allowed map[string]bool
	typAlt  string
	parser  *jwt.Parser
}

// NewVerifier checks the configuration and returns a Verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.Type == "" {
		return nil, errors.New("token: verifier: no token type")
	}
	if cfg.Keys == nil {
		return nil, errors.New("token: verifier: no keys")
	}
	if cfg.MaxLifetime <= 0 {
		return nil, errors.New("token: verifier: the maximum lifetime must be positive")
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if cfg.Audience == "" {
		cfg.Audience = DefaultAudience
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = defaultLeeway
	} else if cfg.Leeway < 0 {
		cfg.Leeway = 0
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = defaultMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	allowed := make(map[string]bool, len(cfg.Algorithms))
	for _, a := range cfg.Algorithms {
		if strings.EqualFold(a, "none") || jwt.GetSigningMethod(a) == nil {
			return nil, fmt.Errorf("token: verifier: algorithm %q is not supported", a)
		}
		allowed[a] = true
	}
	v := &Verifier{
		cfg:     cfg,
		allowed: allowed,
		typAlt:  "application/" + cfg.Type,
		// Claims are validated below, with precise reasons and the
		// lifetime rule that golang-jwt does not have; the parser only
		// decodes (strict base64) and verifies the signature.
		parser: jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding()),
	}
	return v, nil
}

// Type returns the token type the verifier accepts.
func (v *Verifier) Type() string { return v.cfg.Type }

// MaxLifetime returns the longest lifetime accepted.
func (v *Verifier) MaxLifetime() time.Duration { return v.cfg.MaxLifetime }

// Leeway returns the clock skew allowed.
func (v *Verifier) Leeway() time.Duration { return v.cfg.Leeway }

// Verify checks a token and returns its claims, or a *TokenError.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if len(token) > v.cfg.MaxBytes {
		return nil, newError(reasons.TokenTooLarge, nil)
	}
	c := new(Claims)
	_, err := v.parser.ParseWithClaims(token, c, v.keyfunc)
	if err != nil {
		var te *Error
		switch {
		case errors.As(err, &te):
			return nil, te
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
			return nil, newError(reasons.TokenBadSignature, err)
		case errors.Is(err, jwt.ErrTokenUnverifiable):
			// alg missing or not an algorithm golang-jwt knows.
			return nil, newError(reasons.TokenAlgorithm, err)
		}
		return nil, newError(reasons.TokenMalformed, err)
	}
	if err := v.validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

// keyfunc checks the header before any key is used: typ, crit, alg against
// the allow-list and the key's own algorithm.
func (v *Verifier) keyfunc(t *jwt.Token) (any, error) {
	typ, _ := t.Header["typ"].(string)
	if !strings.EqualFold(typ, v.cfg.Type) && !strings.EqualFold(typ, v.typAlt) {
		return nil, newError(reasons.TokenType, nil)
	}
	k, terr := selectKey(t, v.cfg.Keys, v.allowed)
	if terr != nil {
		return nil, terr
	}
	return k.Public, nil
}

func (v *Verifier) validate(c *Claims) error {
	switch {
	case c.ID == "":
		return &Error{Reason: reasons.TokenMissingClaim, Claim: "jti"}
	case c.ExpiresAt == nil:
		return &Error{Reason: reasons.TokenMissingClaim, Claim: "exp"}
	case c.IssuedAt == nil:
		return &Error{Reason: reasons.TokenMissingClaim, Claim: "iat"}
	}
	now, leeway := v.cfg.Now(), v.cfg.Leeway
	exp, iat := c.ExpiresAt.Time, c.IssuedAt.Time
	switch {
	case !now.Before(exp.Add(leeway)):
		return newError(reasons.TokenExpired, nil)
	case c.NotBefore != nil && now.Add(leeway).Before(c.NotBefore.Time):
		return newError(reasons.TokenNotYetValid, nil)
	case now.Add(leeway).Before(iat):
		return newError(reasons.TokenIssuedInFuture, nil)
	case exp.Sub(iat) > v.cfg.MaxLifetime:
		return newError(reasons.TokenLifetime, nil)
	case c.Issuer != v.cfg.Issuer:
		return newError(reasons.TokenIssuer, nil)
	case !slices.Contains(c.Audience, v.cfg.Audience):
		return newError(reasons.TokenAudience, nil)
	}
	return nil
}

// SpentUntil is how long a token's id must stay recorded as used: until the
// token could no longer pass even with the leeway.
func (v *Verifier) SpentUntil(c *Claims) time.Time {
	return c.ExpiresAt.Time.Add(v.cfg.Leeway)
}
