package gate

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// The public vocabulary of the gates (store interfaces and records, options),
// under the names the gate code has always used: the definitions live in
// package gates, the one a user implements and configures.
type (
	AccessOptions      = gates.AccessOptions
	ApprovalDecision   = gates.ApprovalDecision
	ApprovalFilter     = gates.ApprovalFilter
	ApprovalRequest    = gates.ApprovalRequest
	ApprovalState      = gates.ApprovalState
	ApprovalStore      = gates.ApprovalStore
	DuplicatePolicy    = gates.DuplicatePolicy
	IdempotencyOptions = gates.IdempotencyOptions
	IdempotencyOutcome = gates.IdempotencyOutcome
	IdempotencyOwner   = gates.IdempotencyOwner
	IdempotencyRecord  = gates.IdempotencyRecord
	IdempotencyState   = gates.IdempotencyState
	IdempotencyStore   = gates.IdempotencyStore
	Limit              = gates.Limit
	LimitDecision      = gates.LimitDecision
	LimitKey           = gates.LimitKey
	Limiter            = gates.Limiter
	MintedToken        = gates.MintedToken
	Notifier           = gates.Notifier
	QuotaError         = gates.QuotaError
	UnboundError       = gates.UnboundError
)

const (
	ApprovalPending     = gates.ApprovalPending
	ApprovalApproved    = gates.ApprovalApproved
	ApprovalDenied      = gates.ApprovalDenied
	ApprovalExpired     = gates.ApprovalExpired
	ApprovalCancelled   = gates.ApprovalCancelled
	ApprovalExecuted    = gates.ApprovalExecuted
	IdempotencyInFlight = gates.IdempotencyInFlight
	IdempotencyDone     = gates.IdempotencyDone
	DuplicateWarn       = gates.DuplicateWarn
	DuplicateRefuse     = gates.DuplicateRefuse
	DuplicateIgnore     = gates.DuplicateIgnore

	StageIntent         = middleware.StageIntent
	StageAccess         = middleware.StageAccess
	StageParams         = middleware.StageParams
	StageConstraints    = middleware.StageConstraints
	StagePreconditions  = middleware.StagePreconditions
	StageRateLimit      = middleware.StageRateLimit
	StageConfirmation   = middleware.StageConfirmation
	StageApproval       = middleware.StageApproval
	StageIdempotency    = middleware.StageIdempotency
	StageCommit         = middleware.StageCommit
	StagePostconditions = middleware.StagePostconditions
	StageTool           = middleware.StageTool
)

var (
	ErrNotFound          = gates.ErrNotFound
	ErrInvalidTransition = gates.ErrInvalidTransition
	ErrBadCursor         = gates.ErrBadCursor
	ErrStoreBusy         = gates.ErrStoreBusy
)

// MaxApprovalPage bounds the requests one ApprovalStore.List call returns;
// DefaultApprovalPage is the page size when none is asked for.
const (
	MaxApprovalPage     = 100
	DefaultApprovalPage = 50
)

// PageLimit clamps a requested page size to 1..MaxApprovalPage, 0 or less
// meaning DefaultApprovalPage.
func PageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultApprovalPage
	case limit > MaxApprovalPage:
		return MaxApprovalPage
	}
	return limit
}

// MaxVoidedTokens bounds the voided tokens a request keeps (as
// gates.ApprovalRequest's Inherit does); the oldest are dropped first, and
// VoidBefore (the latest run or denial) still voids them by their iat.
const MaxVoidedTokens = 256

// liveTokens drops the tokens expired at now, keeping at most
// MaxVoidedTokens (the newest), in place.
func liveTokens(ts []MintedToken, now time.Time) []MintedToken {
	ts = slices.DeleteFunc(ts, func(t MintedToken) bool { return !now.Before(t.Until) })
	if n := len(ts) - MaxVoidedTokens; n > 0 {
		ts = ts[n:]
	}
	if len(ts) == 0 {
		return nil
	}
	return ts
}

// VoidMinted moves the tokens minted for r to its voided ones, as its call
// runs or is denied at now.
func VoidMinted(r *ApprovalRequest, now time.Time) {
	r.Voided = liveTokens(slices.Concat(r.Voided, r.Minted), now)
	r.Minted = nil
}

// TokenVoid reports whether the approval token jti, issued at iat, is void
// for r: it was voided by a run or denial, or, unknown to r (not signed by
// Decide for it), was issued at or before VoidBefore plus leeway (the
// signing replica's clock may run ahead of the one that set VoidBefore).
func TokenVoid(r *ApprovalRequest, jti string, iat time.Time, leeway time.Duration) bool {
	known := func(t MintedToken) bool { return t.ID == jti }
	switch {
	case jti != "" && slices.ContainsFunc(r.Voided, known):
		return true
	case jti != "" && slices.ContainsFunc(r.Minted, known):
		return false
	}
	return !r.VoidBefore.IsZero() && iat.Unix() <= r.VoidBefore.Add(leeway).Unix()
}

// Vetoed reports whether r is a denial that still vetoes its call at now:
// no new request for the same call is opened.
func Vetoed(r *ApprovalRequest, now time.Time) bool {
	return r.State == ApprovalDenied && now.Before(r.KeepUntil)
}

// QuotaUntil is until when r counts in its requester's quota; zero when it does not count.
//
// A pending request counts until it expires. A confirmation request, which
// its requester decides alone, also counts once decided while the store
// must keep it: confirmed and not run, until it expires; denied, while its
// denial stands (KeepUntil). Otherwise a requester who decides their own
// requests could keep opening new ones past the quota and fill the
// tenant's share of the store.
func QuotaUntil(r *ApprovalRequest) time.Time {
	switch {
	case r.State == ApprovalPending:
		return r.ExpiresAt
	case r.Kind != KindConfirmation:
		return time.Time{}
	case r.State == ApprovalApproved:
		return r.ExpiresAt
	case r.State == ApprovalDenied:
		return r.KeepUntil
	}
	return time.Time{}
}

// CountsInQuota reports whether r counts in its requester's quota at now
// (QuotaUntil; a pending request without an expiry counts).
func CountsInQuota(r *ApprovalRequest, now time.Time) bool {
	until := QuotaUntil(r)
	if r.State == ApprovalPending && until.IsZero() {
		return true
	}
	return now.Before(until)
}

// StateKey builds a store key from a kind and parts. Each part is written
// with its length in front, so no part can be forged to look like two
// ("a:b" + "c" never equals "a" + "b:c"); stores may add their own prefix.
func StateKey(kind string, parts ...string) string {
	n := len(kind)
	for _, p := range parts {
		n += len(p) + 2 + digits(len(p))
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(kind)
	var num [20]byte
	for _, p := range parts {
		b.WriteByte(':')
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// StoreUnavailable is the refusal of a gate whose store failed: 503, retryable.
//
// The cause is kept for logs and never shown to the caller.
//
// A store that is healthy but had no connection free in time (its error
// matches ErrStoreBusy) is refused the same way, 503 and retryable, with the
// reason store_busy: the caller should come back shortly, and an operator
// reading the logs sees a pool too small for the load rather than an outage.
func StoreUnavailable(intent, what string, err error) *axerr.Error {
	if errors.Is(err, ErrStoreBusy) {
		e := axerr.Newf(axerr.CodeStoreUnavailable, "%s is busy; the call was refused to stay safe", what).WithIntent(intent).WithCause(err).WithReason(reasons.StoreBusy)
		e.RetryAfter = time.Second
		return e
	}
	e := axerr.Newf(axerr.CodeStoreUnavailable, "%s is unavailable; the call was refused to stay safe", what).WithIntent(intent).WithCause(err)
	e.RetryAfter = time.Second
	return e
}

// PreconditionFailed is the refusal for a precondition that does not hold:
// AXAG_PRECONDITION_FAILED with details failed_precondition. message, when
// not empty, replaces the default "precondition not met: name". A Checker
// may return it to tell the caller more; the gate adds the suggestion.
func PreconditionFailed(intent, name, message string) *axerr.Error {
	if message == "" {
		message = "precondition not met: " + name
	}
	return axerr.New(axerr.CodePreconditionFailed, message).
		WithIntent(intent).
		WithReason(reasons.PreconditionFailed).
		With("failed_precondition", name)
}

// Matches reports whether r passes the filter, for ApprovalStore
// implementations.
func Matches(f ApprovalFilter, r *ApprovalRequest) bool {
	switch {
	case r.Tenant != f.Tenant && (f.Tenant != "" || !f.AnyTenant):
		return false
	case f.State != "" && r.State != f.State:
		return false
	case f.Decider != "":
		if r.Kind == KindConfirmation {
			return r.Requester == f.Decider
		}
		return r.Requester != f.Decider && len(f.Roles) > 0 && anyRole(f.Roles, r.Roles)
	case len(f.Roles) > 0 && !anyRole(f.Roles, r.Roles):
		return false
	}
	return true
}

// anyRole reports whether have and want share a role.
func anyRole(have, want []string) bool {
	return slices.ContainsFunc(want, func(role string) bool { return slices.Contains(have, role) })
}

// Retained is how long a store keeps r at least: until it expires, or until
// KeepUntil when later.
func Retained(r *ApprovalRequest) time.Time {
	if r.KeepUntil.After(r.ExpiresAt) {
		return r.KeepUntil
	}
	return r.ExpiresAt
}

// ReplayKey is the id under which the gates record a token as used in a ReplayStore.
//
// It is the base64url SHA-256 (middleware.DigestCanonical) of the issuer,
// length-prefixed, and the jti. It is 43 characters long whatever the jti
// (which may be kilobytes), and two issuers that happen to use the same jti
// do not spend each other's tokens.
func ReplayKey(issuer, jti string) string {
	b := make([]byte, 0, 24+len(issuer)+len(jti))
	b = strconv.AppendInt(b, int64(len(issuer)), 10)
	b = append(b, ':')
	b = append(b, issuer...)
	b = append(b, jti...)
	return middleware.DigestCanonical(b)
}

// CodeForKeyword maps a failing JSON Schema keyword to its AXAG code:
// required → MISSING_PARAM, type → INVALID_TYPE, bounds → OUT_OF_RANGE,
// enum/const → INVALID_ENUM, format/pattern → INVALID_FORMAT,
// additionalProperties → the unknown-parameter code.
func CodeForKeyword(keyword string) axerr.Code {
	switch keyword {
	case "required":
		return axerr.CodeMissingParam
	case "type":
		return axerr.CodeInvalidType
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
		"minItems", "maxItems", "minProperties", "maxProperties", "multipleOf":
		return axerr.CodeOutOfRange
	case "enum", "const":
		return axerr.CodeInvalidEnum
	case "format", "pattern", "uniqueItems":
		return axerr.CodeInvalidFormat
	case "additionalProperties", "propertyNames", "false":
		return axerr.CodeUnknownParam
	}
	return axerr.CodeInvalidType
}
