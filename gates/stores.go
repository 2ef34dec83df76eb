package gates

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// The stores below hold everything that must be shared across replicas.
// The memory implementations (gates/memstore) serve one process;
// gates/redisstore serves several. Every method must be safe for concurrent
// use. A store that cannot answer returns an error, and the gate refuses the
// call with AXGATE_STORE_UNAVAILABLE: never fail open.

// ErrNotFound is returned by stores for an id they do not hold.
var ErrNotFound = errors.New("gates: not found")

// Limit is a rate: Count calls per Per, with bursts up to Count. A cooldown
// is the Limit {1, cooldown}.
type Limit struct {
	Count int
	Per   time.Duration
}

// LimitKey is one counter a call is charged to: its key and its limit.
type LimitKey struct {
	Key   string
	Limit Limit
	// Tenant is the tenant of the caller the counter counts (the gate
	// builds Key from it too). A memory limiter keeps its capacity per
	// tenant by it; "" is the share of callers without one.
	Tenant string
}

// LimitDecision is a Limiter's answer for all the counters of a call.
type LimitDecision struct {
	Allowed bool
	// RetryAfter is how long until the call would be allowed, when refused:
	// the longest wait of the counters that refuse.
	RetryAfter time.Duration
	// Remaining calls allowed right now after this one, by the tightest
	// counter.
	Remaining int
	// RefusedBy is the index, in the keys asked, of the counter whose wait
	// is RetryAfter, when refused.
	RefusedBy int
}

// Limiter counts calls per key (GCRA or token bucket).
type Limiter interface {
	// AllowN takes n calls from every counter in keys, all or nothing: when
	// one refuses, none is charged. n = 0 only looks: whether one call would
	// be allowed now. keys are distinct, at least one; n may not exceed any
	// counter's Count (so many calls could never be allowed at once).
	AllowN(ctx context.Context, keys []LimitKey, n int) (LimitDecision, error)
}

// IdempotencyState is the state of an idempotency record.
type IdempotencyState string

// Idempotency record states.
const (
	IdempotencyInFlight IdempotencyState = "in_flight"
	IdempotencyDone     IdempotencyState = "done"
)

// IdempotencyRecord is what the store keeps for one key.
type IdempotencyRecord struct {
	// ArgsSHA256 is the digest of the arguments first sent with the key.
	ArgsSHA256 string           `json:"args_sha256"`
	State      IdempotencyState `json:"state"`
	// Result is the stored result (JSON) of a call that succeeded, once
	// done.
	Result json.RawMessage `json:"result,omitempty"`
	// Refusal is the stored refusal of a call that ran and failed (the
	// tool's error, a postcondition), as its AXAG error envelope (JSON),
	// once done. At most one of Result and Refusal is set.
	Refusal json.RawMessage `json:"refusal,omitempty"`
}

// IdempotencyOutcome is the outcome of a call that ran, as Complete stores
// it: its result or its refusal.
type IdempotencyOutcome struct {
	Result  json.RawMessage
	Refusal json.RawMessage
}

// IdempotencyOwner is the caller an idempotency record is charged to: a
// principal of a tenant, and how many live records it may hold.
type IdempotencyOwner struct {
	Tenant    string
	Principal string
	// Quota is how many live records the owner may hold at once, counted
	// over the records begun with a Quota; 0 charges nothing (the gate's
	// short-lived duplicate markers of calls without a key).
	Quota int
}

// QuotaError is the refusal of a store to hold one more record for an owner
// at its quota: IdempotencyStore.Begin's over the owner's live records,
// ApprovalStore.Create's over the requester's pending requests.
type QuotaError struct {
	// RetryAfter is how long until the owner's oldest live record expires
	// (at least one millisecond).
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string {
	return "gates: quota reached, the oldest record expires in " + e.RetryAfter.String()
}

// ErrStoreBusy is matched (errors.Is) by the error of a store that is
// healthy but had no connection free in time (a pool wait that timed out):
// the gate refuses with reason store_busy rather than call the store down.
var ErrStoreBusy = errors.New("gates: store busy")

// IdempotencyStore keeps the outcome of non-idempotent calls by key.
type IdempotencyStore interface {
	// Begin claims key for a call with these arguments, marking it in flight
	// for ttl, and returns the claim: a token unique to this call that
	// Complete and Release require. If the key is already held it returns the
	// existing record and claim "", and changes nothing. A new record is
	// charged to owner: when owner.Quota > 0 and the owner holds that many
	// live records, Begin returns a *QuotaError and changes nothing (checked
	// and charged atomically with the claim). key must name the owner (the
	// gate builds it from the tenant and the principal), so that one key is
	// always charged to the same owner.
	Begin(ctx context.Context, owner IdempotencyOwner, key, argsSHA256 string, ttl time.Duration) (existing *IdempotencyRecord, claim string, err error)
	// Complete stores the outcome of the call that holds claim on key, kept
	// for ttl (the record stays charged to owner as long). When claim no
	// longer holds the key (its lease ended; another call may hold it now)
	// it changes nothing and returns ErrNotFound.
	Complete(ctx context.Context, owner IdempotencyOwner, key, claim string, outcome IdempotencyOutcome, ttl time.Duration) error
	// Release forgets key while claim holds it in flight (the call did not
	// run, so a retry may run it), and uncharges owner. Otherwise it
	// changes nothing and returns ErrNotFound.
	Release(ctx context.Context, owner IdempotencyOwner, key, claim string) error
}

// ApprovalState is the state of an approval request.
type ApprovalState string

// Approval states: pending → approved | denied | expired | cancelled |
// executed, approved → executed; denied, expired, cancelled and executed are
// terminal.
const (
	ApprovalPending   ApprovalState = "pending"
	ApprovalApproved  ApprovalState = "approved"
	ApprovalDenied    ApprovalState = "denied"
	ApprovalExpired   ApprovalState = "expired"
	ApprovalCancelled ApprovalState = "cancelled"
	// ApprovalExecuted: the call ran on the request's approvals (the
	// commit spent its tokens). The request's other tokens no longer count.
	ApprovalExecuted ApprovalState = "executed"
)

// ApprovalDecision is one approver's answer.
type ApprovalDecision struct {
	Approver string    `json:"approver"`
	Roles    []string  `json:"roles,omitempty"`
	Approve  bool      `json:"approve"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// ApprovalRequest is a call waiting for approval, or for its requester's
// confirmation. Its ID is derived from intent, arguments digest, requester,
// tenant and kind, so a retry of the same call finds the same request.
type ApprovalRequest struct {
	ID string `json:"id"`
	// Kind is "" or "approval" for a request that approvers decide, and
	// "confirmation" for a confirmation request (recorded with
	// axgate.WithDecisionPages): Count 1, no Roles, decided by its
	// requester alone. Both kinds share the store, the requester's quota
	// and the tenant's capacity.
	Kind string `json:"kind,omitempty"`
	Tool string `json:"tool"`
	// Scope is where the call is served beyond its tool
	// (middleware.Call.Scope: the upstream of a gateway with several),
	// shown on its page; "" for none.
	Scope      string             `json:"scope,omitempty"`
	Intent     string             `json:"intent"`
	Requester  string             `json:"requester"`
	Tenant     string             `json:"tenant,omitempty"`
	ArgsSHA256 string             `json:"args_sha256"`
	Arguments  json.RawMessage    `json:"arguments,omitempty"`
	Roles      []string           `json:"roles"`
	Count      int                `json:"count"`
	State      ApprovalState      `json:"state"`
	CreatedAt  time.Time          `json:"created_at"`
	ExpiresAt  time.Time          `json:"expires_at"`
	Decisions  []ApprovalDecision `json:"decisions,omitempty"`
	// VoidBefore: the time of the last denial (the denial's veto) or run of
	// the call. Approval tokens for this call that it does not know (not in
	// Minted or Voided) never count when issued (iat) at or before this
	// second plus the verifier's leeway.
	VoidBefore time.Time `json:"void_before,omitzero"`
	// Minted are the approval tokens Decide signed for this call since its
	// last run or denial (carried over when a lapsed or cancelled request
	// is replaced); Voided are the ones a run or denial voided. A token is
	// known by its jti, so a token in Voided never counts and one in Minted
	// is not void, whatever the clocks of the replicas that signed and
	// checked it: the run of a call voids exactly the tokens signed before
	// it. VoidBefore still voids the tokens in neither (signed outside
	// Decide). Entries are dropped once their token has expired.
	Minted []MintedToken `json:"minted,omitempty"`
	Voided []MintedToken `json:"voided,omitempty"`
	// KeepUntil: the store keeps the request at least until then (the
	// longest lifetime of a token VoidBefore voids), so that a lapsed
	// request still voids them; until then a denied request is not
	// replaced by a new one (the veto).
	KeepUntil time.Time `json:"keep_until,omitzero"`
	// Coalesced is set only on the request handed to a Notifier: how many
	// notifications of the tenant were held back since the last one sent,
	// because of the per-tenant cap. Stores never see it.
	Coalesced int `json:"coalesced_notifications,omitempty"`
}

// Replaceable reports whether a new request for the same call (same id) may
// replace r at now: r lapsed, was cancelled or executed, and is no veto.
// The new request inherits r's VoidBefore and KeepUntil (Inherit).
func (r *ApprovalRequest) Replaceable(now time.Time) bool {
	if r.State == ApprovalDenied && now.Before(r.KeepUntil) {
		return false // a denial still vetoes its call
	}
	lapsed := !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
	return lapsed || r.State == ApprovalCancelled || r.State == ApprovalExecuted
}

// Inherit carries the void of old over to r, which replaces it: its
// VoidBefore, KeepUntil, voided tokens and the tokens minted for it that
// have not expired at r.CreatedAt (they stay known, so that the next run
// voids them).
func (r *ApprovalRequest) Inherit(old *ApprovalRequest) {
	if old.VoidBefore.After(r.VoidBefore) {
		r.VoidBefore = old.VoidBefore
	}
	if old.KeepUntil.After(r.KeepUntil) {
		r.KeepUntil = old.KeepUntil
	}
	r.Minted = liveTokens(append(slices.Clone(old.Minted), r.Minted...), r.CreatedAt)
	r.Voided = liveTokens(append(slices.Clone(old.Voided), r.Voided...), r.CreatedAt)
}

// MintedToken is an approval token signed for a request: its jti and until
// when it may count (its expiry with the verifier's leeway).
type MintedToken struct {
	ID    string    `json:"jti"`
	Until time.Time `json:"until"`
}

// maxVoidedTokens bounds the voided tokens a request keeps; the oldest are
// dropped first, and VoidBefore (the latest run or denial) still voids
// them by their iat. internal/gate keeps the same bound.
const maxVoidedTokens = 256

// liveTokens drops the tokens expired at now, keeping at most
// maxVoidedTokens (the newest), in place.
func liveTokens(ts []MintedToken, now time.Time) []MintedToken {
	ts = slices.DeleteFunc(ts, func(t MintedToken) bool { return !now.Before(t.Until) })
	if n := len(ts) - maxVoidedTokens; n > 0 {
		ts = ts[n:]
	}
	if len(ts) == 0 {
		return nil
	}
	return ts
}

// ErrBadCursor is wrapped by the error of List for a cursor it did not
// hand out.
var ErrBadCursor = errors.New("gates: invalid cursor")

// ApprovalFilter selects requests for an approver's inbox.
type ApprovalFilter struct {
	// Tenant keeps only that tenant's requests. Empty keeps only requests
	// without a tenant, unless AnyTenant is set.
	Tenant string
	// AnyTenant, with an empty Tenant, keeps every tenant's requests (an
	// administrator's view; an approver's inbox never sets it).
	AnyTenant bool
	// Roles, when set, keeps requests that any of these roles may approve.
	Roles []string
	// Decider, when set, keeps only the requests this principal may
	// decide: their own confirmation requests (Kind "confirmation"), and
	// the approval requests of others that one of Roles may approve (none
	// when Roles is empty).
	Decider string
	// State, when set, keeps only requests in that state.
	State ApprovalState
}

// ApprovalStore keeps approval requests and their state.
type ApprovalStore interface {
	// Create stores req unless a request with its ID exists that is not
	// Replaceable; it returns the stored request and whether it was created
	// now. A replaced request passes its void on (Inherit). With quota > 0,
	// a new request is created only while its requester (Requester and
	// Tenant) holds fewer than quota requests that count (pending ones,
	// and confirmation requests decided but still kept for the decision:
	// confirmed until they expire, denied until KeepUntil), counted
	// atomically with the create; otherwise Create returns a *QuotaError and
	// stores nothing. The existing request of the same call is returned
	// whatever the quota.
	Create(ctx context.Context, req ApprovalRequest, quota int) (ApprovalRequest, bool, error)
	// Get returns the request, or ErrNotFound.
	Get(ctx context.Context, id string) (ApprovalRequest, error)
	// Update applies fn to the request atomically (no other update interleaves)
	// and stores the result; an error from fn aborts the update and is
	// returned as is.
	Update(ctx context.Context, id string, fn func(*ApprovalRequest) error) (ApprovalRequest, error)
	// List returns up to limit requests (at most 100; 50 when limit is 0 or
	// less) that match the filter,
	// oldest first, after cursor ("" for the first page), and the cursor of
	// the next page ("" at the end). A page may be shorter than limit while
	// next is not "": a store bounds the work of one call. Pending requests
	// past their expiry met on the way leave the store's index. A cursor
	// the store did not hand out is an error wrapping ErrBadCursor.
	List(ctx context.Context, f ApprovalFilter, cursor string, limit int) (page []ApprovalRequest, next string, err error)
}

// ErrInvalidTransition is wrapped by the error of a state change the approval
// state machine does not allow.
var ErrInvalidTransition = errors.New("gates: invalid state transition")
