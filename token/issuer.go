package token

import (
	"crypto/rand"
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/middleware"
)

// Issuer signs confirmation and approval tokens with the documented
// claims.
type Issuer struct {
	// Signer signs the tokens. Required.
	Signer *Signer
	// Issuer and Audience become iss and aud (DefaultIssuer and
	// DefaultAudience when empty).
	Issuer, Audience string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (ti Issuer) base(sub, intent, tenant, digest string, lifetime time.Duration) (Claims, time.Time, error) {
	if ti.Signer == nil {
		return Claims{}, time.Time{}, errors.New("token: no signing key")
	}
	if lifetime <= 0 {
		return Claims{}, time.Time{}, errors.New("token: lifetime must be positive")
	}
	now := time.Now
	if ti.Now != nil {
		now = ti.Now
	}
	iat := now().Truncate(time.Second)
	exp := iat.Add(lifetime)
	iss, aud := ti.Issuer, ti.Audience
	if iss == "" {
		iss = DefaultIssuer
	}
	if aud == "" {
		aud = DefaultAudience
	}
	return Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    iss,
			Subject:   sub,
			Audience:  jwt.ClaimStrings{aud},
			ID:        rand.Text(),
			IssuedAt:  jwt.NewNumericDate(iat),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		Intent:     intent,
		Tenant:     tenant,
		ArgsSHA256: digest,
	}, exp, nil
}

// Confirmation signs a confirmation token for the principal's call of the
// intent with arguments of digest argsSHA256 (middleware.Call.ArgsSHA256).
func (ti Issuer) Confirmation(p middleware.Principal, intent, argsSHA256 string, lifetime time.Duration) (string, time.Time, error) {
	c, exp, err := ti.base(p.ID, intent, p.Tenant, argsSHA256, lifetime)
	if err != nil {
		return "", time.Time{}, err
	}
	tok, err := ti.Signer.Sign(TypConfirmation, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// Grant is the call an approval token is signed for: the caller who asked
// (Requester) and the call's intent, tenant and argument digest.
type Grant struct {
	Requester, Intent, Tenant, ArgsSHA256 string
	// ID is the token's jti; empty means a fresh random one. The approval
	// gate records the jti on the request before it signs, so that it can
	// void the token later.
	ID string
}

// Approval signs an approval token by approver (holding roles) for the
// call g names.
func (ti Issuer) Approval(approver string, roles []string, g Grant, lifetime time.Duration) (string, time.Time, error) {
	c, exp, err := ti.base(approver, g.Intent, g.Tenant, g.ArgsSHA256, lifetime)
	if err != nil {
		return "", time.Time{}, err
	}
	if g.ID != "" {
		c.ID = g.ID
	}
	c.Roles = roles
	c.Requester = g.Requester
	tok, err := ti.Signer.Sign(TypApproval, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}
