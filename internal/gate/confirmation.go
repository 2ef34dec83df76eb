package gate

import (
	"cmp"
	"context"
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

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// ConfirmationConfig configures the confirmation gate.
type ConfirmationConfig struct {
	// Verifier checks confirmation tokens (type TypConfirmation). When nil,
	// no token is accepted and only MCP elicitation can confirm a call.
	Verifier *token.Verifier
	// Audience is the aud the Verifier requires (token.DefaultAudience
	// when empty): a refused token of another audience names it, as the
	// one to mint; it is no secret.
	Audience string
	// Replay records used token ids. Required.
	Replay token.ReplayStore
	// Threshold is the risk level from which confirmation is required even
	// without confirmation_required (default high). Critical actions always
	// need it.
	Threshold manifest.RiskLevel
	// Requests, when set with decision pages (ApprovalConfig.Pages), records
	// a confirmation request for a call without a token and lets the call
	// run once its requester confirmed it there.
	Requests *Approval
}

// Confirmation is the gate for actions that need a person's confirmation.
//
// Those are the ones with confirmation_required, or whose risk level reaches
// the threshold. A call passes with a valid, unused confirmation token bound
// to it, or when the transport asks the person inline (MCP elicitation) and
// the person accepts.
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
		if r := c.cfg.Requests; r != nil && r.cfg.Pages != "" {
			return c.confirmOnPage(ctx, call, digest, next)
		}
		if call.Elicit == nil || call.CheckOnly() {
			// Check never asks a person: it reports what the call lacks.
			return middleware.Result{}, c.missing(call, digest, "")
		}
		return c.elicit(ctx, call, digest, next)
	}
	if c.cfg.Verifier == nil {
		return middleware.Result{}, c.missing(call, digest, axerr.Reason(reasons.TokenUnknownKey))
	}
	claims, err := c.cfg.Verifier.Verify(raw)
	if err != nil {
		return middleware.Result{}, c.refused(call, digest, err)
	}
	if terr := claims.CheckBinding(claims.Subject, call, digest); terr != nil {
		return middleware.Result{}, c.refused(call, digest, terr)
	}
	if terr := issuedBeforeStart(c.cfg.Replay, claims); terr != nil {
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
			return middleware.Result{}, c.refused(call, digest, tokenError(reasons.TokenUsed, nil))
		}
		return next.Invoke(ctx, call)
	}
	replayed := replayRefusal(func([]int) *axerr.Error {
		call.Facts.ConfirmationJTI = "" // it did not count
		return c.refused(call, digest, tokenError(reasons.TokenUsed, nil))
	})
	ctx = spend(ctx, call, c.cfg.Replay, pendingUse{
		use:     token.Use{ID: key, Expires: c.cfg.Verifier.SpentUntil(claims), Tenant: claims.Tenant},
		refusal: &replayed,
	})
	return next.Invoke(ctx, call)
}

// elicit asks the person inline through the transport (call.Elicit, which
// only a transport that may ask the person sets) and lets the call go on
// when they accept.
func (c *Confirmation) elicit(ctx context.Context, call *middleware.Call, digest string, next middleware.Invoker) (middleware.Result, error) {
	accepted, err := call.Elicit(ctx, c.Message(call))
	switch {
	case err != nil:
		return middleware.Result{}, c.missing(call, digest, reasons.ElicitationFailed).WithCause(err)
	case !accepted:
		return middleware.Result{}, c.missing(call, digest, reasons.Declined)
	}
	call.Facts.ConfirmationElicited = true
	return next.Invoke(ctx, call)
}

func (c *Confirmation) refused(call *middleware.Call, digest string, err error) *axerr.Error {
	var te *token.Error
	if !errors.As(err, &te) {
		te = tokenError(reasons.TokenMalformed, err)
	}
	e := c.missing(call, digest, axerr.Reason(te.Reason))
	e.Message = "the confirmation token " + te.Reason.Describe() + "; ask the person to confirm this call again"
	if te.Reason == reasons.TokenAudience {
		// Whoever mints the token needs the audience, as for a bearer
		// token of the wrong audience (httpgate).
		aud := cmp.Or(c.cfg.Audience, token.DefaultAudience)
		e.Message = fmt.Sprintf("the confirmation token is meant for another audience: this server accepts only tokens whose aud names %q; ask the person to confirm this call again", aud)
		e.With("expected_audience", aud)
	}
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
		With("token_type", token.TypConfirmation)
	e.Gate = StageConfirmation
	if v := c.cfg.Verifier; v != nil {
		e.With("max_token_lifetime", int(v.MaxLifetime()/time.Second))
	}
	if reason != "" {
		e.WithReason(reason)
		switch reason {
		case reasons.Declined:
			e.Message = "the person declined to confirm this call"
		case reasons.ElicitationFailed:
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

// RenderConfirmationMessage fills the {{param}} placeholders of the action's confirmation_message.
//
// The values come from args. Values are made safe to show as plain text:
// strings are inserted with control, formatting (bidirectional overrides,
// zero-width) and other invisible characters escaped as \u{…}, and cut at
// 200 characters; other values are inserted as compact JSON; a missing
// argument reads "(not set)". The result is never parsed again, so a value
// that looks like a placeholder stays literal. UIs that render HTML or
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
