package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// MaxApprovalTokens bounds the approval tokens one call may present (or
// approval_count, when larger): each costs a signature check.
const MaxApprovalTokens = 16

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, req ApprovalRequest) error

// ApprovalRequested calls f.
func (f NotifierFunc) ApprovalRequested(ctx context.Context, req ApprovalRequest) error {
	return f(ctx, req)
}

// ApprovalConfig configures the approval gate.
type ApprovalConfig struct {
	// Verifier checks approval tokens (type TypApproval). When nil, no token
	// is accepted.
	Verifier *token.Verifier
	// Replay records used token ids. Required.
	Replay token.ReplayStore
	// Store keeps approval requests. Required.
	Store ApprovalStore
	// Notifier, when set, hears of new requests.
	Notifier Notifier
	// RequestTTL is how long a request stays pending (default
	// DefaultApprovalLifetime).
	RequestTTL time.Duration
	// Issuer signs the tokens Decide returns; without a Signer, Decide can
	// only deny.
	Issuer token.Issuer
	// TokenLifetime is the lifetime of tokens Decide issues (default: the
	// verifier's maximum, else DefaultApprovalLifetime).
	TokenLifetime time.Duration
	// Quota is how many pending requests one requester (principal and
	// tenant) may hold (DefaultApprovalQuota when zero; negative: no
	// quota). Over it a call that would open a new request is refused with
	// AXAG_RATE_LIMITED, reason approval_quota.
	Quota int
	// NotificationsPerMinute caps the notifications of one tenant per
	// minute, in this process (DefaultNotificationsPerMinute when zero;
	// negative: no cap). The requests over it are not notified; their
	// count is carried on the tenant's next notification
	// (ApprovalRequest.Coalesced).
	NotificationsPerMinute int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Pages, when set, is the base URL (ending with a slash) of the pages
	// where people decide requests (axgate.WithDecisionPages): refusals name
	// the page of their request (decision_id, decision_url, agent_action),
	// and a call whose request is approved runs on it once, without tokens.
	// The confirmation gate records confirmation requests through this gate
	// (ConfirmationConfig.Requests).
	Pages string
	// ConfirmationLifetime is how long a confirmed confirmation request may
	// be run on, and how long a denied one refuses its call (default
	// token.DefaultConfirmationLifetime).
	ConfirmationLifetime time.Duration
}

// Defaults of ApprovalConfig.
const (
	DefaultApprovalQuota          = 20
	DefaultNotificationsPerMinute = 60
)

// Approval is the gate for approval_required actions.
//
// The call needs approval_count valid approval tokens from distinct
// approvers, each holding one of approval_roles, none of them the caller,
// all bound to this call. When they are missing it records a pending
// approval request that approvers decide with Decide.
type Approval struct {
	cfg    ApprovalConfig
	notify notifyCap
	// veto is how long a denial vetoes its call and voids earlier tokens:
	// the longest lifetime of an approval token, with the clock leeway.
	veto time.Duration
}

// NewApproval returns the approval gate.
func NewApproval(cfg ApprovalConfig) (*Approval, error) {
	if cfg.Replay == nil {
		return nil, errors.New("approval gate: no replay store")
	}
	if cfg.Store == nil {
		return nil, errors.New("approval gate: no approval store")
	}
	if cfg.RequestTTL <= 0 {
		cfg.RequestTTL = token.DefaultApprovalLifetime
	}
	if cfg.TokenLifetime <= 0 {
		cfg.TokenLifetime = token.DefaultApprovalLifetime
		if cfg.Verifier != nil {
			cfg.TokenLifetime = cfg.Verifier.MaxLifetime()
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Issuer.Now == nil {
		cfg.Issuer.Now = cfg.Now
	}
	if cfg.Quota == 0 {
		cfg.Quota = DefaultApprovalQuota
	}
	if cfg.NotificationsPerMinute == 0 {
		cfg.NotificationsPerMinute = DefaultNotificationsPerMinute
	}
	if cfg.ConfirmationLifetime <= 0 {
		cfg.ConfirmationLifetime = token.DefaultConfirmationLifetime
	}
	veto := cfg.TokenLifetime
	if v := cfg.Verifier; v != nil {
		veto = max(veto, v.MaxLifetime()) + v.Leeway()
	}
	return &Approval{cfg: cfg, veto: veto, notify: notifyCap{perMinute: cfg.NotificationsPerMinute}}, nil
}

// Stage returns the gate as a chain stage.
func (g *Approval) Stage() middleware.Stage {
	return middleware.Stage{Name: StageApproval, Interceptor: g.intercept, Applies: func(a *manifest.Action) bool {
		return a == nil || a.ApprovalRequired
	}}
}

// rejectedToken says why one presented approval token did not count.
type rejectedToken struct {
	Index  int          `json:"index"`
	Reason token.Reason `json:"reason"`
	Claim  string       `json:"claim,omitempty"`
}

func (g *Approval) intercept(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	a := call.Action
	if a == nil || !a.ApprovalRequired {
		return next.Invoke(ctx, call)
	}
	digest, err := call.ArgsSHA256()
	if err != nil {
		return middleware.Result{}, err
	}
	p := call.Principal
	need := max(a.ApprovalCount, 1)
	reqID := ApprovalRequestID(a.Intent, digest, p.ID, p.Tenant, call.Scope)
	call.Facts.ApprovalRequestID = reqID

	if n := len(call.Credentials.Approvals); n > max(need, MaxApprovalTokens) {
		// Each token costs a signature check: bound the work a caller can ask for.
		e := g.invalid(call, reqID, reasons.TooManyTokens, "",
			fmt.Sprintf("%d approval tokens were presented; at most %d are accepted", n, max(need, MaxApprovalTokens)))
		delete(e.Details, "approver")
		return middleware.Result{}, e
	}
	var (
		approvers []string
		accepted  []acceptedToken
		rejected  []rejectedToken
	)
	for i, raw := range call.Credentials.Approvals {
		c, terr := g.verify(raw, call, digest)
		if terr != nil {
			rejected = append(rejected, rejectedToken{Index: i, Reason: terr.Reason, Claim: terr.Claim})
			continue
		}
		if c.Subject == p.ID {
			return middleware.Result{}, g.invalid(call, reqID, reasons.SelfApproval, c.Subject,
				"the caller cannot approve their own call; ask someone else in an approval role")
		}
		if !slices.ContainsFunc(c.Roles, func(r string) bool { return slices.Contains(a.ApprovalRoles, r) }) {
			return middleware.Result{}, g.invalid(call, reqID, reasons.RoleNotAllowed, c.Subject,
				"the approver holds none of the roles that may approve this action")
		}
		if slices.Contains(approvers, c.Subject) {
			// The same person approving twice still counts once.
			continue
		}
		key := ReplayKey(c.Issuer, c.ID)
		if call.CheckOnly() {
			// No commit follows a check, so look the id up to report a
			// spent token. A call that runs is checked once, by Consume at
			// the commit.
			used, err := g.cfg.Replay.Used(ctx, key)
			if err != nil {
				return middleware.Result{}, StoreUnavailable(call.Intent(), "the token replay store", err)
			}
			if used {
				rejected = append(rejected, rejectedToken{Index: i, Reason: reasons.TokenUsed})
				continue
			}
		}
		approvers = append(approvers, c.Subject)
		accepted = append(accepted, acceptedToken{index: i, approver: c.Subject, jti: c.ID, issued: c.IssuedAt.Time,
			use: token.Use{ID: key, Expires: g.cfg.Verifier.SpentUntil(c), Tenant: c.Tenant}})
	}

	if len(approvers) < need {
		if !call.CheckOnly() {
			// A token an earlier gate passed (the confirmation) that is
			// spent already fails the call at the commit: refuse as the
			// commit would, and ask no approver about it.
			switch e, err := pendingBatch(ctx, call).spentAlready(ctx); {
			case err != nil:
				return middleware.Result{}, err
			case e != nil:
				return middleware.Result{}, e
			}
		}
		req, notified, err := g.open(ctx, call, g.record(call, digest, reqID, need))
		switch {
		case err != nil:
			return middleware.Result{}, err
		case Vetoed(&req, g.cfg.Now()):
			return middleware.Result{}, g.denied(call, reqID)
		case g.cfg.Pages != "" && usable(&req, g.cfg.Now()):
			// Approved on the page by enough approvers: the call runs on
			// the request itself, once.
			call.Facts.Approvers = heldApprovers(&req)
			ctx = g.runOnDecision(ctx, call, &req, func() *axerr.Error {
				call.Facts.Approvers = nil // they did not count
				e := g.missingError(call, digest, reqID, need, nil, rejected).WithReason(reasons.DecisionUsed)
				e.With("request_state", string(ApprovalExecuted))
				e.Message = "the approval of this call was used by a call that ran; the same call needs a new approval"
				return e
			})
			return next.Invoke(ctx, call)
		}
		return middleware.Result{}, g.missingFor(call, req, notified, digest, reqID, need, approvers, rejected)
	}
	sorted := slices.Clone(approvers)
	sort.Strings(sorted)
	call.Facts.Approvers = sorted
	if call.CheckOnly() {
		return next.Invoke(ctx, call)
	}
	replayed := replayRefusal(func(indexes []int) *axerr.Error {
		return g.replayed(call, digest, reqID, need, accepted, rejected, indexes)
	})
	uses := make([]pendingUse, len(accepted))
	for i, t := range accepted {
		uses[i] = pendingUse{use: t.use, index: t.index, refusal: &replayed}
	}
	ctx = spend(ctx, call, g.cfg.Replay, uses...)
	// Registered after the spend: the request becomes executed once its
	// tokens are spent, right before the tool runs.
	call.OnCommit(func(ctx context.Context) error {
		return g.executed(ctx, call, digest, reqID, need, accepted, rejected)
	})
	return next.Invoke(ctx, call)
}

// acceptedToken is an approval token that counts for the call.
type acceptedToken struct {
	index    int // among the presented tokens
	approver string
	jti      string
	issued   time.Time
	use      token.Use
}

// errNoChange ends an Update without writing.
var errNoChange = errors.New("no change")

// executed is the approval gate's commit: it moves the call's request to
// executed and voids the tokens minted for it (by jti), so that its
// remaining tokens no longer count, after checking that the tokens are not
// void (minted before a denial of the call, or before an earlier run on the
// request: ApprovalRequest.TokenVoid). A call whose tokens were minted
// without a request (none is stored) has nothing to mark. A request that
// lapsed or was cancelled is not marked (those states are final); its
// tokens are single-use all the same.
func (g *Approval) executed(ctx context.Context, call *middleware.Call, digest, reqID string, need int, accepted []acceptedToken, rejected []rejectedToken) error {
	now := g.cfg.Now()
	var refusal *axerr.Error
	_, err := g.cfg.Store.Update(ctx, reqID, func(r *ApprovalRequest) error {
		var void []int
		counted := 0
		for _, t := range accepted {
			if TokenVoid(r, t.jti, t.issued, g.leeway()) {
				void = append(void, t.index)
				continue
			}
			counted++
		}
		if r.State == ApprovalDenied || counted < need {
			refusal = g.voided(call, digest, reqID, need, accepted, rejected, void, r.State == ApprovalDenied)
			return refusal
		}
		switch r.State {
		case ApprovalPending, ApprovalApproved:
		default:
			return errNoChange
		}
		r.State = ApprovalExecuted
		r.VoidBefore = now
		VoidMinted(r, now)
		if until := now.Add(g.veto); until.After(r.KeepUntil) {
			r.KeepUntil = until
		}
		return nil
	})
	switch {
	case err == nil, errors.Is(err, errNoChange), errors.Is(err, ErrNotFound):
		return nil
	case refusal != nil:
		return refusal
	}
	return StoreUnavailable(call.Intent(), "the approval store", err)
}

// voided is the refusal of a call whose approval tokens are void at the
// commit: AXAG_APPROVAL_INVALID, reason approval_denied, while a denial
// vetoes the call; otherwise AXAG_APPROVAL_MISSING with the void tokens
// (reason void: issued before the call last ran) among the rejected.
func (g *Approval) voided(call *middleware.Call, digest, reqID string, need int, accepted []acceptedToken, rejected []rejectedToken, void []int, denied bool) *axerr.Error {
	if denied {
		return g.denied(call, reqID)
	}
	return g.discounted(call, digest, reqID, need, accepted, rejected, void, reasons.TokenVoid,
		"an approval token was issued before this call last ran on its approvals; ask for approval again")
}

// denied is the refusal of a call a denial vetoes: 403
// AXAG_APPROVAL_INVALID, reason approval_denied.
func (g *Approval) denied(call *middleware.Call, reqID string) *axerr.Error {
	e := axerr.New(axerr.CodeApprovalInvalid, "approval of this call was denied; the same call cannot be asked again for now").
		WithIntent(call.Intent()).
		WithReason(reasons.ApprovalDenied).
		With("approval_request_id", reqID).
		With("request_state", string(ApprovalDenied))
	e.Gate = StageApproval
	return e
}

// replayed is AXAG_APPROVAL_MISSING for approval tokens found used at the
// commit (indexes among the presented tokens): they no longer count.
func (g *Approval) replayed(call *middleware.Call, digest, reqID string, need int, accepted []acceptedToken, rejected []rejectedToken, indexes []int) *axerr.Error {
	return g.discounted(call, digest, reqID, need, accepted, rejected, indexes, reasons.TokenUsed,
		"an approval token was already used; ask for approval again")
}

// discounted is AXAG_APPROVAL_MISSING for a call some of whose accepted
// approval tokens (indexes among the presented tokens) turned out not to
// count at the commit, for reason: the facts record only the approvers
// whose tokens still count, and the discounted tokens join the rejected
// ones in the order they were presented.
func (g *Approval) discounted(call *middleware.Call, digest, reqID string, need int, accepted []acceptedToken, rejected []rejectedToken, indexes []int, reason token.Reason, message string) *axerr.Error {
	var approvers []string
	for _, t := range accepted {
		if !slices.Contains(indexes, t.index) {
			approvers = append(approvers, t.approver)
		}
	}
	call.Facts.Approvers = slices.Clone(approvers)
	sort.Strings(call.Facts.Approvers)
	all := slices.Clone(rejected)
	for _, i := range indexes {
		all = append(all, rejectedToken{Index: i, Reason: reason})
	}
	slices.SortFunc(all, func(a, b rejectedToken) int { return a.Index - b.Index })
	e := g.missingError(call, digest, reqID, need, approvers, all)
	e.Message = message
	return e
}

// verify checks one approval token and its binding to the call.
func (g *Approval) verify(raw string, call *middleware.Call, digest string) (*token.Claims, *token.Error) {
	if g.cfg.Verifier == nil {
		return nil, tokenError(reasons.TokenUnknownKey, nil)
	}
	c, err := g.cfg.Verifier.Verify(raw)
	if err != nil {
		var te *token.Error
		if !errors.As(err, &te) {
			te = tokenError(reasons.TokenMalformed, err)
		}
		return nil, te
	}
	if c.Subject == "" {
		return nil, &token.Error{Reason: reasons.TokenMissingClaim, Claim: "sub"}
	}
	if terr := c.CheckBinding(c.Requester, call, digest); terr != nil {
		return nil, terr
	}
	if terr := issuedBeforeStart(g.cfg.Replay, c); terr != nil {
		return nil, terr
	}
	return c, nil
}

// invalid is AXAG_APPROVAL_INVALID (403): a valid token from someone who may
// not approve.
func (g *Approval) invalid(call *middleware.Call, reqID string, reason axerr.Reason, approver, msg string) *axerr.Error {
	e := axerr.New(axerr.CodeApprovalInvalid, msg).
		WithIntent(call.Intent()).
		WithReason(reason).
		With("approver", approver).
		With("roles", detailList(call.Action.ApprovalRoles)).
		With("approval_request_id", reqID)
	e.Gate = StageApproval
	return e
}

// record is the approval request a call without enough approvals opens.
func (g *Approval) record(call *middleware.Call, digest, reqID string, need int) ApprovalRequest {
	a, p := call.Action, call.Principal
	now := g.cfg.Now()
	return ApprovalRequest{
		ID:         reqID,
		Tool:       call.Tool,
		Scope:      call.Scope,
		Intent:     a.Intent,
		Requester:  p.ID,
		Tenant:     p.Tenant,
		ArgsSHA256: digest,
		Arguments:  append([]byte(nil), call.Arguments...),
		Roles:      slices.Clone(a.ApprovalRoles),
		Count:      need,
		State:      ApprovalPending,
		CreatedAt:  now,
		ExpiresAt:  now.Add(g.cfg.RequestTTL),
	}
}

// open records rec (or finds the request of the same call) and notifies of
// a new one; notified says whether it was notified (nil: not new, or no
// notifier). A check-only call records nothing and notifies no one: it gets
// the existing request, or one in state "not_requested".
//
// A new request is a side effect of the call: it is bounded by the
// requester's quota (counted by the store, atomically with the create) and
// charges the action's rate limit and cooldown, as a call that runs does.
// The caller refuses a call a denial vetoes (Vetoed): no request is opened
// for it.
func (g *Approval) open(ctx context.Context, call *middleware.Call, rec ApprovalRequest) (req ApprovalRequest, notified *bool, err error) {
	now := g.cfg.Now()
	created := false
	if call.CheckOnly() {
		req, err = g.cfg.Store.Get(ctx, rec.ID)
		if errors.Is(err, ErrNotFound) {
			req, err = ApprovalRequest{ID: rec.ID, Kind: rec.Kind, State: "not_requested"}, nil
		}
	} else {
		req, created, err = g.cfg.Store.Create(ctx, rec, max(g.cfg.Quota, 0))
	}
	var qe *QuotaError
	if errors.As(err, &qe) {
		return ApprovalRequest{}, nil, g.overQuota(call, qe.RetryAfter)
	}
	if err != nil {
		return ApprovalRequest{}, nil, StoreUnavailable(call.Intent(), "the approval store", err)
	}
	if !created {
		return req, nil, nil
	}
	if rc := pendingRateCharge(ctx, call); rc != nil {
		if e := rc.take(ctx, 1); e != nil {
			// The charge is refused: withdraw the request (a cancelled
			// request is replaced when the call is asked again).
			_, _ = g.cfg.Store.Update(ctx, rec.ID, func(r *ApprovalRequest) error {
				if r.State != ApprovalPending {
					return errNoChange
				}
				r.State = ApprovalCancelled
				return nil
			})
			return ApprovalRequest{}, nil, e
		}
	}
	if g.cfg.Notifier != nil {
		if n, ok := g.notify.admit(req.Tenant, now); ok {
			note := req
			note.Coalesced = n
			ok := g.cfg.Notifier.ApprovalRequested(ctx, note) == nil
			notified = &ok
		} else {
			held := false
			notified = &held
		}
	}
	return req, notified, nil
}

// missingFor is AXAG_APPROVAL_MISSING for the call whose request is req.
func (g *Approval) missingFor(call *middleware.Call, req ApprovalRequest, notified *bool, digest, reqID string, need int, approvers []string, rejected []rejectedToken) *axerr.Error {
	e := g.missingError(call, digest, reqID, need, approvers, rejected)
	e.With("request_state", string(req.State))
	if notified != nil {
		e.With("approvers_notified", *notified)
	}
	if req.State == "not_requested" && e.Details != nil {
		// No page to show for a request not made (a check).
		delete(e.Details, DetailDecisionID)
		delete(e.Details, DetailDecisionURL)
		delete(e.Details, axerr.DetailAgentAction)
	}
	switch req.State {
	case ApprovalDenied:
		e.Message = "approval of this call was denied"
	case ApprovalExpired:
		e.Message = "the approval request for this call expired"
	case ApprovalCancelled:
		e.Message = "the approval request for this call was cancelled"
	case ApprovalExecuted:
		e.Message = "the approval request for this call was used by a call that ran"
	}
	return e
}

// overQuota is the refusal of a call that would open a request beyond its
// requester's quota: 429 AXAG_RATE_LIMITED, reason approval_quota, with
// retry_after the time until the requester's oldest pending request expires.
func (g *Approval) overQuota(call *middleware.Call, retryAfter time.Duration) *axerr.Error {
	if retryAfter < time.Second {
		retryAfter = time.Second
	}
	what := "approval requests"
	if g.cfg.Pages != "" {
		what = "approval or confirmation requests" // one quota for both kinds
	}
	e := axerr.Newf(axerr.CodeRateLimited, "the caller already has %d %s pending; no new one is opened until one is decided or expires", g.cfg.Quota, what).
		WithIntent(call.Intent()).
		WithReason(reasons.ApprovalQuota).
		With("quota", g.cfg.Quota)
	e.RetryAfter = retryAfter
	e.Suggestion = fmt.Sprintf("Wait %d seconds, or until a pending request is decided, then call again.", e.RetryAfterSeconds())
	e.Gate = StageApproval
	return e
}

// notifyCap caps the notifications of each tenant per minute (a fixed
// window), counting the ones held back.
type notifyCap struct {
	perMinute int
	mu        sync.Mutex
	tenants   map[string]*notifyWindow
	swept     time.Time // the last sweep of the windows
}

type notifyWindow struct {
	start      time.Time
	sent, held int
}

// maxNotifyTenants bounds the windows kept: stale ones are dropped, and a
// tenant beyond the bound gets no window (its notification is held back).
const maxNotifyTenants = 10_000

// admit reports whether a notification of tenant may go out now, and how
// many were held back before it (to carry on it).
func (c *notifyCap) admit(tenant string, now time.Time) (held int, ok bool) {
	if c.perMinute < 0 {
		return 0, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants == nil {
		c.tenants = make(map[string]*notifyWindow)
	}
	w := c.tenants[tenant]
	if w == nil {
		if len(c.tenants) >= maxNotifyTenants && now.Sub(c.swept) >= time.Second {
			// Windows over a minute old count nothing any more (a count
			// of held notifications they carry is lost, not a
			// notification). At most one sweep a second: the walk is
			// long.
			c.swept = now
			for k, o := range c.tenants {
				if now.Sub(o.start) >= time.Minute {
					delete(c.tenants, k)
				}
			}
		}
		if len(c.tenants) >= maxNotifyTenants {
			// As many tenants were notified this minute as are tracked:
			// hold this one back rather than track without bound (the
			// request stands; its approvers are told it was not notified).
			return 0, false
		}
		w = &notifyWindow{start: now}
		c.tenants[tenant] = w
	}
	if now.Sub(w.start) >= time.Minute {
		w.start, w.sent = now, 0
	}
	if w.sent >= c.perMinute {
		w.held++
		return 0, false
	}
	w.sent++
	held, w.held = w.held, 0
	return held, true
}

func (g *Approval) missingError(call *middleware.Call, digest, reqID string, need int, approvers []string, rejected []rejectedToken) *axerr.Error {
	a := call.Action
	got := len(approvers)
	e := axerr.Newf(axerr.CodeApprovalMissing, "this call needs approval by %d person(s) holding one of the roles %s; %d valid approval(s) received", need, strings.Join(a.ApprovalRoles, ", "), got).
		WithIntent(a.Intent).
		WithSuggestion("Ask a person holding one of the approval roles to approve request "+reqID+", then call again with their approval tokens.").
		With("approval_request_id", reqID).
		With("roles", detailList(a.ApprovalRoles)).
		With("count_needed", need).
		With("count_received", got).
		With("args_sha256", digest).
		With("token_type", token.TypApproval)
	e.Gate = StageApproval
	if got > 0 {
		e.With("approvers", slices.Clone(approvers))
	}
	if len(rejected) > 0 {
		e.With("rejected_tokens", rejected)
	}
	if v := g.cfg.Verifier; v != nil {
		e.With("max_token_lifetime", int(v.MaxLifetime()/time.Second))
	}
	if g.cfg.Pages != "" {
		withPage(e, g.cfg.Pages, reqID, approvePageAction)
		e.Suggestion = "Show the person the page " + DecisionURL(g.cfg.Pages, reqID) + ": once enough approvers approved this call there, call again with the same arguments (no token is needed)."
	}
	return e
}

// Decide records an approver's decision on a pending request.
//
// The approver must belong to its tenant (a request of another tenant reads
// as unknown: AXAG_APPROVAL_INVALID with reason request_not_found), not be
// its requester and hold one of its roles. Each approver decides a request
// once: a second approval or denial by the same approver is refused (409
// AXGATE_ALREADY_DECIDED, reason already_decided) and mints nothing. The
// request becomes approved when enough distinct approvers approved, denied
// at the first denial; a denial vetoes the call (no new request for it, and
// approval tokens issued before it never count) for the tokens' maximum
// lifetime. On approval it returns a signed approval token for the
// requester's call. Refusals are *axerr.Error values.
func (g *Approval) Decide(ctx context.Context, approver middleware.Principal, requestID string, approve bool, reason string) (ApprovalRequest, string, time.Time, error) {
	if approver.ID == "" {
		return ApprovalRequest{}, "", time.Time{}, axerr.New(axerr.CodeUnauthenticated, "an approver must be authenticated")
	}
	req, err := g.cfg.Store.Get(ctx, requestID)
	if errors.Is(err, ErrNotFound) {
		return ApprovalRequest{}, "", time.Time{}, requestNotFound(requestID)
	}
	if err != nil {
		return ApprovalRequest{}, "", time.Time{}, StoreUnavailable("", "the approval store", err)
	}
	if IsConfirmation(&req) {
		return g.confirm(ctx, approver, req, approve, reason)
	}
	if err := g.mayDecide(approver, req); err != nil {
		return ApprovalRequest{}, "", time.Time{}, err
	}
	if decidedBy(req, approver.ID) {
		return ApprovalRequest{}, "", time.Time{}, alreadyDecided(req)
	}
	// After mayDecide: to a person of another tenant, a request reads as
	// unknown whatever the configuration.
	if approve && g.cfg.Issuer.Signer == nil {
		return ApprovalRequest{}, "", time.Time{}, axerr.New(axerr.CodeInternal, "no signing key is configured, so approval tokens cannot be issued")
	}
	roles := approverRoles(approver, req)
	// The token's jti is recorded on the request before it is signed, so
	// that a run or denial from now on voids it, whatever the clocks.
	jti := rand.Text()
	req, err = g.cfg.Store.Update(ctx, requestID, func(r *ApprovalRequest) error {
		if IsConfirmation(r) {
			return requestNotFound(r.ID) // cannot happen: ids differ by kind
		}
		if err := g.mayDecide(approver, *r); err != nil {
			return err
		}
		if decidedBy(*r, approver.ID) {
			// A concurrent decision of the same approver won.
			return alreadyDecided(*r)
		}
		if r.State != ApprovalPending {
			return decideError(reasons.InvalidTransition, r.ID, "the approval request is already "+string(r.State)).
				With("state", string(r.State)).WithCause(ErrInvalidTransition)
		}
		now := g.cfg.Now()
		r.Decisions = append(r.Decisions, ApprovalDecision{
			Approver: approver.ID, Roles: roles, Approve: approve, Reason: reason, At: now,
		})
		switch {
		case !approve:
			r.State = ApprovalDenied
			// The veto: tokens approved before now no longer count, and
			// the record (which refuses a new request) outlives them.
			r.VoidBefore = now
			VoidMinted(r, now)
			if until := now.Add(g.veto); until.After(r.KeepUntil) {
				r.KeepUntil = until
			}
			return nil
		case distinctApprovals(*r) >= max(r.Count, 1):
			r.State = ApprovalApproved
		}
		r.Minted = append(liveTokens(slices.Clone(r.Minted), now), MintedToken{ID: jti, Until: now.Add(g.cfg.TokenLifetime + g.leeway() + time.Second)})
		return nil
	})
	if err != nil {
		if _, ok := axerr.As(err); ok {
			return ApprovalRequest{}, "", time.Time{}, err
		}
		if errors.Is(err, ErrInvalidTransition) {
			return ApprovalRequest{}, "", time.Time{}, decideError(reasons.InvalidTransition, requestID, err.Error())
		}
		return ApprovalRequest{}, "", time.Time{}, StoreUnavailable(req.Intent, "the approval store", err)
	}
	if !approve {
		return req, "", time.Time{}, nil
	}
	tok, exp, err := g.issue(approver.ID, roles, req, jti)
	return req, tok, exp, err
}

// leeway is the verifier's clock leeway (none without a verifier).
func (g *Approval) leeway() time.Duration {
	if g.cfg.Verifier == nil {
		return 0
	}
	return g.cfg.Verifier.Leeway()
}

// alreadyDecided is the refusal of an approver's second decision: 409.
func alreadyDecided(r ApprovalRequest) *axerr.Error {
	return axerr.New(axerr.CodeAlreadyDecided, "you have decided this approval request already; a decision is made once").
		WithIntent(r.Intent).
		WithReason(reasons.AlreadyDecided).
		With("approval_request_id", r.ID).
		With("state", string(r.State))
}

func (g *Approval) issue(approver string, roles []string, req ApprovalRequest, jti string) (string, time.Time, error) {
	tok, exp, err := g.cfg.Issuer.Approval(approver, roles, token.Grant{Requester: req.Requester, Intent: req.Intent, Tenant: req.Tenant, ArgsSHA256: req.ArgsSHA256, ID: jti}, g.cfg.TokenLifetime)
	if err != nil {
		return "", time.Time{}, axerr.New(axerr.CodeInternal, "the approval token could not be signed").WithCause(err)
	}
	return tok, exp, nil
}

// mayDecide checks who may decide a request: someone of its tenant (a
// request of another tenant reads as unknown, and nothing of it is told), not
// its requester, holding one of its roles.
func (g *Approval) mayDecide(approver middleware.Principal, req ApprovalRequest) error {
	switch {
	case approver.Tenant != req.Tenant:
		return requestNotFound(req.ID)
	case approver.ID == req.Requester:
		return decideError(reasons.SelfApproval, req.ID, "the requester cannot decide their own request").WithIntent(req.Intent)
	case !approver.HasRole(req.Roles...):
		return decideError(reasons.RoleNotAllowed, req.ID, "the approver holds none of the roles that may decide this request").
			WithIntent(req.Intent).With("roles", detailList(req.Roles))
	}
	return nil
}

func decideError(reason axerr.Reason, reqID, msg string) *axerr.Error {
	return axerr.New(axerr.CodeApprovalInvalid, msg).WithReason(reason).With("approval_request_id", reqID)
}

// requestNotFound is the answer for an unknown request id, and for the
// request of another tenant, which must not be told apart from it. It
// matches ErrNotFound with errors.Is.
func requestNotFound(id string) *axerr.Error {
	return decideError(reasons.RequestNotFound, id, "there is no approval request "+id).WithCause(ErrNotFound)
}

// approverRoles are the approver's roles that may decide the request: what
// the approval token asserts.
func approverRoles(p middleware.Principal, req ApprovalRequest) []string {
	var out []string
	for _, r := range p.Roles {
		if slices.Contains(req.Roles, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// decidedBy reports whether id has decided r (approved or denied).
func decidedBy(r ApprovalRequest, id string) bool {
	return slices.ContainsFunc(r.Decisions, func(d ApprovalDecision) bool { return d.Approver == id })
}

func distinctApprovals(r ApprovalRequest) int {
	var seen []string
	for _, d := range r.Decisions {
		if d.Approve && !slices.Contains(seen, d.Approver) {
			seen = append(seen, d.Approver)
		}
	}
	return len(seen)
}

// Pending lists, a page at a time, the pending requests the approver may decide.
//
// They come oldest first; each is of the approver's tenant (for an
// approver without a tenant, of none), and is either an approval request
// that names one of the approver's roles and is not the approver's own, or
// (with decision pages) a confirmation request of the approver's own.
// cursor is "" for the first page, else the
// next cursor of the page before; limit is at most MaxApprovalPage
// (DefaultApprovalPage when 0 or less). next is "" after the last page; a
// page may be short (even empty) while next is not. The store is asked for
// exactly that tenant, never for every tenant's requests. A cursor the
// store did not hand out is refused with AXGATE_INVALID_ARGUMENTS (400).
func (g *Approval) Pending(ctx context.Context, approver middleware.Principal, cursor string, limit int) (page []ApprovalRequest, next string, err error) {
	if approver.ID == "" || (len(approver.Roles) == 0 && g.cfg.Pages == "") {
		return []ApprovalRequest{}, "", nil
	}
	f := ApprovalFilter{Tenant: approver.Tenant, Roles: slices.Clone(approver.Roles), State: ApprovalPending}
	if g.cfg.Pages != "" {
		f.Decider = approver.ID
	}
	all, next, err := g.cfg.Store.List(ctx, f, cursor, PageLimit(limit))
	if errors.Is(err, ErrBadCursor) {
		return nil, "", axerr.New(axerr.CodeInvalidArguments, "the cursor is not one this inbox handed out").
			WithReason(reasons.InvalidCursor).WithSuggestion("Start again without a cursor.")
	}
	if err != nil {
		return nil, "", StoreUnavailable("", "the approval store", err)
	}
	out := make([]ApprovalRequest, 0, len(all))
	for _, r := range all {
		if r.Tenant != approver.Tenant {
			continue
		}
		if IsConfirmation(&r) {
			if g.cfg.Pages != "" && r.Requester == approver.ID {
				out = append(out, r)
			}
			continue
		}
		if r.Requester != approver.ID && approver.HasRole(r.Roles...) {
			out = append(out, r)
		}
	}
	return out, next, nil
}

// Request returns the approval request with this id to viewer.
//
// The viewer must be its requester or someone who may decide it (of its
// tenant, holding one of its roles); a confirmation request only to its
// requester (to anyone else it reads as unknown). An unknown id, and a request of another
// tenant, are AXAG_APPROVAL_INVALID with reason request_not_found; anyone
// else of the tenant gets reason not_allowed, and neither learns anything of
// the request.
func (g *Approval) Request(ctx context.Context, viewer middleware.Principal, id string) (ApprovalRequest, error) {
	if viewer.ID == "" {
		return ApprovalRequest{}, axerr.New(axerr.CodeUnauthenticated, "only an authenticated principal may read an approval request")
	}
	req, err := g.cfg.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return ApprovalRequest{}, requestNotFound(id)
	}
	if err != nil {
		return ApprovalRequest{}, StoreUnavailable("", "the approval store", err)
	}
	switch {
	case viewer.Tenant != req.Tenant:
		return ApprovalRequest{}, requestNotFound(id)
	case IsConfirmation(&req):
		if err := mayConfirm(viewer, req); err != nil {
			return ApprovalRequest{}, err
		}
		return req, nil
	case viewer.ID == req.Requester, viewer.HasRole(req.Roles...):
		return req, nil
	}
	return ApprovalRequest{}, decideError(reasons.NotAllowed, id, "only the requester and the approvers of an approval request may read it")
}

// Cancel moves a pending request to cancelled. Only its requester may; a
// request of another tenant reads as unknown.
func (g *Approval) Cancel(ctx context.Context, requester middleware.Principal, id string) error {
	_, err := g.cfg.Store.Update(ctx, id, func(r *ApprovalRequest) error {
		switch {
		case r.Tenant != requester.Tenant, IsConfirmation(r) && r.Requester != requester.ID:
			return requestNotFound(id)
		case r.Requester != requester.ID:
			return decideError(reasons.NotRequester, id, "only the requester can cancel an approval request")
		}
		r.State = ApprovalCancelled
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return requestNotFound(id)
	case errors.Is(err, ErrInvalidTransition):
		return decideError(reasons.InvalidTransition, id, err.Error())
	}
	if _, ok := axerr.As(err); ok {
		return err
	}
	return StoreUnavailable("", "the approval store", err)
}
