package gate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/gowebpki/jcs"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// Decisions held server-side (axgate.WithDecisionPages): a call refused for
// a missing confirmation or approval records a request that a person decides
// on a page; the same call repeated after the decision runs on it once,
// without a token.

// KindConfirmation is the Kind of a confirmation request: decided by its
// requester alone. Approval requests have Kind "" (or KindApproval).
const (
	KindConfirmation = "confirmation"
	KindApproval     = "approval"
)

// Details keys of a refusal that names the page of its call.
const (
	DetailDecisionID  = "decision_id"
	DetailDecisionURL = "decision_url"
)

// Agent actions of refusals that name the page of their call.
const (
	confirmPageAction = "Show decision_url to the user and ask them to confirm or deny this exact call there; once they have decided, call again with exactly the same arguments (no token is needed)."
	approvePageAction = "Show decision_url to the user: the approvers decide this exact call there; once it is approved, call again with exactly the same arguments (no token is needed)."
)

// ConfirmationRequestID derives the id of the confirmation request for a
// call: as ApprovalRequestID, plus the kind, so that the confirmation and the
// approval of one call are two requests.
func ConfirmationRequestID(intent, argsSHA256, requester, tenant, scope string) string {
	fields := []string{intent, argsSHA256, requester, tenant, KindConfirmation}
	if scope != "" {
		fields = append(fields, "scope", scope)
	}
	doc, _ := json.Marshal(fields) // cannot fail for strings
	if canon, err := jcs.Transform(doc); err == nil {
		doc = canon
	}
	return "cnf_" + middleware.DigestCanonical(doc)[:24]
}

// IsConfirmation reports whether r is a confirmation request.
func IsConfirmation(r *ApprovalRequest) bool { return r.Kind == KindConfirmation }

// DecisionURL is the page of request id under the pages' base URL (which
// ends with a slash).
func DecisionURL(base, id string) string { return base + "requests/" + id }

// usable reports whether the call may run on the decision held in r at now:
// r is decided for the call (confirmed, or approved by enough approvers) and
// has not lapsed.
func usable(r *ApprovalRequest, now time.Time) bool {
	return r.State == ApprovalApproved && !lapsed(r, now)
}

// heldKey is the id under which the run of a call on r's decision is
// recorded in the replay store, with the tokens the call spends: one per
// request (its id and creation), so that of concurrent repeats exactly one
// runs, atomically with the tokens they carry.
func heldKey(r *ApprovalRequest) string {
	return ReplayKey("axgate:decision", r.ID+"|"+strconv.FormatInt(r.CreatedAt.UnixNano(), 10))
}

// withPage adds the page of request id to a refusal, with what the agent
// should do.
func withPage(e *axerr.Error, base, id, action string) *axerr.Error {
	url := DecisionURL(base, id)
	return e.With(DetailDecisionID, id).With(DetailDecisionURL, url).With(axerr.DetailAgentAction, action)
}

// runOnDecision lets the call run on the decision held in req (usable):
// the decision is spent at the commit with the call's tokens, in one
// Consume, and the request moves to executed, so that of concurrent repeats
// one runs and a later one is refused (refuse builds that refusal). A
// check-only call spends nothing.
func (g *Approval) runOnDecision(ctx context.Context, call *middleware.Call, req *ApprovalRequest, refuse func() *axerr.Error) context.Context {
	if call.CheckOnly() {
		return ctx
	}
	id := req.ID
	replayed := replayRefusal(func([]int) *axerr.Error { return refuse() })
	ctx = spend(ctx, call, g.cfg.Replay, pendingUse{
		use:     token.Use{ID: heldKey(req), Expires: req.ExpiresAt.Add(g.leeway() + time.Second), Tenant: req.Tenant},
		refusal: &replayed,
	})
	// Registered after the spend: the request becomes executed once the
	// decision is spent, right before the tool runs.
	call.OnCommit(func(ctx context.Context) error { return g.executeHeld(ctx, call, id, refuse) })
	return ctx
}

// executeHeld is the commit of a call that runs on a held decision: it
// moves the request from approved to executed (a compare-and-set in the
// store), or refuses when the decision is no longer there to use.
//
// The decision is spent already (with the call's tokens), so a store that
// fails here would leave the request approved with its decision used up,
// refusing the same call (decision_used) until the request lapses: the
// change is tried again, a few times, even when the call's context ends.
func (g *Approval) executeHeld(ctx context.Context, call *middleware.Call, id string, refuse func() *axerr.Error) error {
	var err error
	for attempt := range heldAttempts {
		if attempt > 0 {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heldRetryTimeout)
			err = g.executeOnce(actx, call, id, refuse)
			cancel()
		} else {
			err = g.executeOnce(ctx, call, id, refuse)
		}
		if _, refused := axerr.As(err); err == nil || (refused && !axerr.Is(err, axerr.CodeStoreUnavailable)) {
			return err
		}
	}
	return err
}

// heldAttempts bounds the tries of executeHeld; heldRetryTimeout bounds each
// try after the first.
const (
	heldAttempts     = 3
	heldRetryTimeout = 2 * time.Second
)

// executeOnce is one try of executeHeld.
func (g *Approval) executeOnce(ctx context.Context, call *middleware.Call, id string, refuse func() *axerr.Error) error {
	now := g.cfg.Now()
	var refusal *axerr.Error
	_, err := g.cfg.Store.Update(ctx, id, func(r *ApprovalRequest) error {
		if !usable(r, now) {
			refusal = refuse()
			return refusal
		}
		r.State = ApprovalExecuted
		if !IsConfirmation(r) {
			// As a run on tokens: the approval tokens minted for the
			// request no longer count.
			r.VoidBefore = now
			VoidMinted(r, now)
			if until := now.Add(g.veto); until.After(r.KeepUntil) {
				r.KeepUntil = until
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case refusal != nil:
		return refusal
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalidTransition):
		return refuse()
	}
	return StoreUnavailable(call.Intent(), "the approval store", err)
}

// confirmOnPage is the confirmation gate for a call without a token when
// decisions are held (axgate.WithDecisionPages): the call runs on its
// confirmation request once its requester confirmed it; a denial refuses it
// (reason declined); otherwise a transport that may ask the person inline
// (call.Elicit) still does, and else the request is recorded and the
// refusal names its page.
func (c *Confirmation) confirmOnPage(ctx context.Context, call *middleware.Call, digest string, next middleware.Invoker) (middleware.Result, error) {
	g := c.cfg.Requests
	p := call.Principal
	id := ConfirmationRequestID(call.Intent(), digest, p.ID, p.Tenant, call.Scope)
	now := g.cfg.Now()
	var req ApprovalRequest
	if call.Elicit != nil && !call.CheckOnly() {
		// Ask inline unless the person decided on the page already: no
		// request is recorded for a call the transport can ask about.
		r, err := g.cfg.Store.Get(ctx, id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return middleware.Result{}, StoreUnavailable(call.Intent(), "the approval store", err)
		}
		if err != nil || (!usable(&r, now) && !Vetoed(&r, now)) {
			return c.elicit(ctx, call, digest, next)
		}
		req = r
	} else {
		r, _, err := g.open(ctx, call, ApprovalRequest{
			ID:         id,
			Kind:       KindConfirmation,
			Tool:       call.Tool,
			Scope:      call.Scope,
			Intent:     call.Intent(),
			Requester:  p.ID,
			Tenant:     p.Tenant,
			ArgsSHA256: digest,
			Arguments:  append([]byte(nil), call.Arguments...),
			Count:      1,
			State:      ApprovalPending,
			CreatedAt:  now,
			ExpiresAt:  now.Add(g.cfg.RequestTTL),
		})
		if err != nil {
			return middleware.Result{}, err
		}
		req = r
	}
	switch {
	case usable(&req, now):
		if !call.CheckOnly() {
			call.Facts.ConfirmationRequestID = id
		}
		ctx = g.runOnDecision(ctx, call, &req, func() *axerr.Error {
			call.Facts.ConfirmationRequestID = "" // it did not count
			e := c.onPage(call, digest, reasons.DecisionUsed, id, string(ApprovalExecuted))
			e.Message = "the person's confirmation of this call was used by a call that ran; the same call needs a new confirmation"
			return e
		})
		return next.Invoke(ctx, call)
	case Vetoed(&req, now):
		return middleware.Result{}, c.onPage(call, digest, reasons.Declined, id, string(req.State))
	case req.State == "not_requested":
		e := c.missing(call, digest, "")
		e.With("request_state", "not_requested")
		return middleware.Result{}, e
	}
	return middleware.Result{}, c.onPage(call, digest, "", id, string(req.State))
}

// onPage is AXAG_CONFIRMATION_MISSING naming the page of the call's
// confirmation request id.
func (c *Confirmation) onPage(call *middleware.Call, digest string, reason axerr.Reason, id, state string) *axerr.Error {
	base := c.cfg.Requests.cfg.Pages
	e := c.missing(call, digest, reason)
	withPage(e, base, id, confirmPageAction).With("request_state", state)
	url := DecisionURL(base, id)
	e.Suggestion = "Show the person the page " + url + "; once they have confirmed this call there, call again with the same arguments (no token is needed)."
	switch {
	case reason == reasons.Declined:
		e.Message = "the person declined this call on its confirmation page"
		e.Suggestion = "Do not call again with the same arguments for now: the person declined. Ask them what to do instead."
		e.With(axerr.DetailAgentAction, "Do not call again with the same arguments: the person declined this call. Ask the user what to do instead.")
	case reason == "":
		e.Message = "this call needs the person's confirmation: show them the page " + url
	}
	return e
}

// heldApprovers are the approvers of r's approvals, sorted, for the facts of
// a call that runs on them.
func heldApprovers(r *ApprovalRequest) []string {
	var out []string
	for _, d := range r.Decisions {
		if d.Approve && !slices.Contains(out, d.Approver) {
			out = append(out, d.Approver)
		}
	}
	sort.Strings(out)
	return out
}

// confirm is Decide for a confirmation request: only its requester (same
// principal and tenant) may decide it; anyone else reads it as unknown.
// Confirming mints no token: the call runs on the request itself, once,
// within the confirmation lifetime. A denial refuses the same call (reason
// declined) for that lifetime plus the leeway.
func (g *Approval) confirm(ctx context.Context, person middleware.Principal, req ApprovalRequest, approve bool, reason string) (ApprovalRequest, string, time.Time, error) {
	if err := mayConfirm(person, req); err != nil {
		return ApprovalRequest{}, "", time.Time{}, err
	}
	if decidedBy(req, person.ID) {
		return ApprovalRequest{}, "", time.Time{}, alreadyDecided(req)
	}
	out, err := g.cfg.Store.Update(ctx, req.ID, func(r *ApprovalRequest) error {
		if err := mayConfirm(person, *r); err != nil {
			return err
		}
		if decidedBy(*r, person.ID) {
			return alreadyDecided(*r)
		}
		if r.State != ApprovalPending {
			return decideError(reasons.InvalidTransition, r.ID, "the confirmation request is already "+string(r.State)).
				With("state", string(r.State)).WithCause(ErrInvalidTransition)
		}
		now := g.cfg.Now()
		r.Decisions = append(r.Decisions, ApprovalDecision{Approver: person.ID, Approve: approve, Reason: reason, At: now})
		if approve {
			// The call may run on it as long as a token minted now could.
			r.State = ApprovalApproved
			r.ExpiresAt = now.Add(g.cfg.ConfirmationLifetime)
			return nil
		}
		// The denial refuses the same call for a while, then lapses: the
		// call asked again after it opens a new request.
		r.State = ApprovalDenied
		r.ExpiresAt = now
		r.KeepUntil = now.Add(g.cfg.ConfirmationLifetime + g.leeway())
		return nil
	})
	if err != nil {
		if _, ok := axerr.As(err); ok {
			return ApprovalRequest{}, "", time.Time{}, err
		}
		if errors.Is(err, ErrNotFound) {
			return ApprovalRequest{}, "", time.Time{}, requestNotFound(req.ID)
		}
		if errors.Is(err, ErrInvalidTransition) {
			return ApprovalRequest{}, "", time.Time{}, decideError(reasons.InvalidTransition, req.ID, err.Error())
		}
		return ApprovalRequest{}, "", time.Time{}, StoreUnavailable(req.Intent, "the approval store", err)
	}
	return out, "", time.Time{}, nil
}

// mayConfirm checks who may decide (and read) a confirmation request: its
// requester, of its tenant. Anyone else is told nothing of it.
func mayConfirm(person middleware.Principal, req ApprovalRequest) error {
	if person.Tenant != req.Tenant || person.ID != req.Requester {
		return requestNotFound(req.ID)
	}
	return nil
}
