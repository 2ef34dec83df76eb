package gates

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// ConfirmationConfig configures the confirmation gate.
type ConfirmationConfig struct {
	// Verifier checks confirmation tokens (type TypConfirmation). When nil,
	// no token is accepted and only MCP elicitation can confirm a call.
	Verifier *Verifier
	// Replay records used token ids. Required.
	Replay ReplayStore
	// Threshold is the risk level from which confirmation is required even
	// without confirmation_required (default high). Critical actions always
	// need it.
	Threshold manifest.RiskLevel
}

// Confirmation is the gate for actions that need a person's confirmation:
// those with confirmation_required, or whose risk level reaches the
// threshold. A call passes with a valid, unused confirmation token bound to
// it, or when the transport asks the person inline (MCP elicitation) and the
// person accepts.
type Confirmation struct {
	cfg ConfirmationConfig
}

// NewConfirmation returns the confirmation gate.
func NewConfirmation(cfg ConfirmationConfig) (*Confirmation, error) {
	if cfg.Replay == nil {
		return nil, errors.New("confirmation gate: no replay store")
	}
	if cfg.Threshold == "" {
		cfg.Threshold = manifest.RiskHigh
	}
	if cfg.Threshold.Rank() == 0 && cfg.Threshold != manifest.RiskNone {
		return nil, fmt.Errorf("confirmation gate: unknown risk level %q", cfg.Threshold)
	}
	return &Confirmation{cfg: cfg}, nil
}

// Required reports whether the action needs confirmation.
func (c *Confirmation) Required(a *manifest.Action) bool {
	if a == nil {
		return false
	}
	return a.ConfirmationRequired || a.RiskLevel == manifest.RiskCritical ||
		(a.RiskLevel != "" && a.RiskLevel.AtLeast(c.cfg.Threshold))
}

// Stage returns the gate as a chain stage.
func (c *Confirmation) Stage() middleware.Stage {
	return middleware.Stage{Name: StageConfirmation, Interceptor: c.intercept, Applies: func(a *manifest.Action) bool {
		return a == nil || c.Required(a)
	}}
}

func (c *Confirmation) intercept(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	if !c.Required(call.Action) {
		return next.Invoke(ctx, call)
	}
	digest, err := call.ArgsSHA256()
	if err != nil {
		return middleware.Result{}, err
	}
	raw := call.Credentials.Confirmation
	if raw == "" {
		if call.Elicit == nil || call.CheckOnly() {
			// Check never asks a person: it reports what the call lacks.
			return middleware.Result{}, c.missing(call, digest, "")
		}
		accepted, err := call.Elicit(ctx, c.Message(call))
		switch {
		case err != nil:
			return middleware.Result{}, c.missing(call, digest, axerr.ReasonElicitationFailed).WithCause(err)
		case !accepted:
			return middleware.Result{}, c.missing(call, digest, axerr.ReasonDeclined)
		}
		call.Facts.ConfirmationElicited = true
		return next.Invoke(ctx, call)
	}
	if c.cfg.Verifier == nil {
		return middleware.Result{}, c.missing(call, digest, axerr.Reason(ReasonUnknownKey))
	}
	claims, err := c.cfg.Verifier.Verify(raw)
	if err != nil {
		return middleware.Result{}, c.refused(call, digest, err)
	}
	if terr := bindToCall(claims, claims.Subject, call, digest); terr != nil {
		return middleware.Result{}, c.refused(call, digest, terr)
	}
	call.Facts.ConfirmationJTI = claims.ID
	key := ReplayKey(claims.Issuer, claims.ID)
	if call.CheckOnly() {
		// No commit follows a check, so look the id up to report a spent
		// token. A call that runs is checked once, by Consume at the commit.
		used, err := c.cfg.Replay.Used(ctx, key)
		if err != nil {
			return middleware.Result{}, StoreUnavailable(call.Intent(), "the token replay store", err)
		}
		if used {
			return middleware.Result{}, c.refused(call, digest, tokenError(ReasonUsed, nil))
		}
		return next.Invoke(ctx, call)
	}
	replayed := replayRefusal(func([]int) *axerr.Error {
		call.Facts.ConfirmationJTI = "" // it did not count
		return c.refused(call, digest, tokenError(ReasonUsed, nil))
	})
	ctx = spend(ctx, call, c.cfg.Replay, pendingUse{
		use:     TokenUse{ID: key, Expires: c.cfg.Verifier.SpentUntil(claims), Tenant: claims.Tenant},
		refusal: &replayed,
	})
	return next.Invoke(ctx, call)
}

func (c *Confirmation) refused(call *middleware.Call, digest string, err error) *axerr.Error {
	var te *TokenError
	if !errors.As(err, &te) {
		te = tokenError(ReasonMalformed, err)
	}
	e := c.missing(call, digest, axerr.Reason(te.Reason))
	e.Message = "the confirmation token " + te.Reason.Describe() + "; ask the person to confirm this call again"
	if te.Claim != "" {
		e.With("claim", te.Claim)
	}
	return e.WithCause(err)
}

// missing is AXAG_CONFIRMATION_MISSING with what a UI needs to ask the person.
func (c *Confirmation) missing(call *middleware.Call, digest string, reason axerr.Reason) *axerr.Error {
	a := call.Action
	msg := c.Message(call)
	e := axerr.New(axerr.CodeConfirmationMissing, "this call needs the person's confirmation").
		WithIntent(a.Intent).
		WithSuggestion("Ask the person: \""+msg+"\" If they agree, call again with a confirmation token for these exact arguments.").
		With("confirmation_message", msg).
		With("risk_level", string(a.RiskLevel)).
		With("side_effects", detailList(a.SideEffects)).
		With("args_sha256", digest).
		With("token_type", TypConfirmation)
	e.Gate = StageConfirmation
	if v := c.cfg.Verifier; v != nil {
		e.With("max_token_lifetime", int(v.MaxLifetime()/time.Second))
	}
	if reason != "" {
		e.WithReason(reason)
		switch reason {
		case axerr.ReasonDeclined:
			e.Message = "the person declined to confirm this call"
		case axerr.ReasonElicitationFailed:
			e.Message = "the person could not be asked to confirm this call"
		}
	}
	return e
}

// detailList is a copy of s for an error's details: never nil (JSON [],
// not null), and never sharing the manifest's array with whoever edits the
// error.
func detailList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// Message returns the confirmation message for the call: the action's
// confirmation_message with {{param}} placeholders filled from the arguments
// (see RenderConfirmationMessage), or a default naming the action.
func (c *Confirmation) Message(call *middleware.Call) string {
	args, _ := call.Args()
	return RenderConfirmationMessage(call.Action, args)
}

// placeholder matches {{ name }} as the manifest loader does.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// maxPlaceholderRunes bounds one filled-in value of a confirmation message.
const maxPlaceholderRunes = 200

// RenderConfirmationMessage fills the {{param}} placeholders of the action's
// confirmation_message from args. Values are made safe to show as plain
// text: strings are inserted with control, formatting (bidirectional
// overrides, zero-width) and other invisible characters escaped as \u{…},
// and cut at 200 characters; other values are inserted as compact JSON; a
// missing argument reads "(not set)". The result is never parsed again, so a
// value that looks like a placeholder stays literal. UIs that render HTML or
// Markdown must still escape the message for their medium. Without a
// confirmation_message the text names the action and its risk.
func RenderConfirmationMessage(a *manifest.Action, args map[string]any) string {
	if a == nil {
		return ""
	}
	tmpl := a.ConfirmationMessage
	if tmpl == "" {
		s := "Allow " + a.Intent
		if a.Description != "" {
			s += " (" + safeText(a.Description) + ")"
		}
		if a.RiskLevel != "" {
			s += ", risk " + string(a.RiskLevel)
		}
		return s + "?"
	}
	var b strings.Builder
	rest := tmpl
	for {
		loc := placeholder.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:loc[0]])
		name := rest[loc[2]:loc[3]]
		v, ok := args[name]
		if !ok {
			b.WriteString("(not set)")
		} else {
			b.WriteString(renderValue(v))
		}
		rest = rest[loc[1]:]
	}
	return b.String()
}

func renderValue(v any) string {
	switch x := v.(type) {
	case string:
		return safeText(x)
	case nil:
		return "null"
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	return safeText(string(out))
}

// safeText escapes what a person could not see or that could reorder or
// hide text, and cuts long values.
func safeText(s string) string {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if n == maxPlaceholderRunes {
			if i < len(s) {
				b.WriteString("…")
			}
			break
		}
		n++
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\u{FFFD}`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) ||
			(!unicode.IsPrint(r) && r != ' '):
			b.WriteString(`\u{` + strings.ToUpper(strconv.FormatInt(int64(r), 16)) + `}`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TokenIssuer signs confirmation and approval tokens with the documented
// claims.
type TokenIssuer struct {
	// Signer signs the tokens. Required.
	Signer *Signer
	// Issuer and Audience become iss and aud (DefaultIssuer and
	// DefaultAudience when empty).
	Issuer, Audience string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (ti TokenIssuer) base(sub, intent, tenant, digest string, lifetime time.Duration) (Claims, time.Time, error) {
	if ti.Signer == nil {
		return Claims{}, time.Time{}, errors.New("no signing key is configured")
	}
	if lifetime <= 0 {
		return Claims{}, time.Time{}, errors.New("token lifetime must be positive")
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
func (ti TokenIssuer) Confirmation(p middleware.Principal, intent, argsSHA256 string, lifetime time.Duration) (string, time.Time, error) {
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

// Approval signs an approval token by approver (holding roles) for the
// request's call.
func (ti TokenIssuer) Approval(approver string, roles []string, req ApprovalRequest, lifetime time.Duration) (string, time.Time, error) {
	return ti.approval(approver, roles, req, lifetime, "")
}

// approval is Approval with the token's jti when not empty (the approval
// gate records it on the request before signing).
func (ti TokenIssuer) approval(approver string, roles []string, req ApprovalRequest, lifetime time.Duration, jti string) (string, time.Time, error) {
	c, exp, err := ti.base(approver, req.Intent, req.Tenant, req.ArgsSHA256, lifetime)
	if err != nil {
		return "", time.Time{}, err
	}
	if jti != "" {
		c.ID = jti
	}
	c.Roles = roles
	c.Requester = req.Requester
	tok, err := ti.Signer.Sign(TypApproval, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}
