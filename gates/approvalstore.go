package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/axgate/axgate/middleware"
)

// ErrInvalidTransition is wrapped by the error of a state change the approval
// state machine does not allow.
var ErrInvalidTransition = errors.New("invalid state transition")

// ErrApprovalStoreFull is returned when a MemoryApprovalStore holds as many
// live requests as it may.
var ErrApprovalStoreFull = errors.New("approval store is full")

// approvalTransitions is the state machine of approval requests, in the
// style of the task state machine of the AXAG validation rules: a request is
// decided once, terminal states are final, and an approved request becomes
// executed when its call runs.
var approvalTransitions = map[ApprovalState][]ApprovalState{
	ApprovalPending:   {ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCancelled, ApprovalExecuted},
	ApprovalApproved:  {ApprovalExecuted},
	ApprovalDenied:    {},
	ApprovalExpired:   {},
	ApprovalCancelled: {},
	ApprovalExecuted:  {},
}

// Terminal reports whether s is decided for good: no decision changes it,
// and at most the run of its call (executed, from approved) follows.
func (s ApprovalState) Terminal() bool {
	next, known := approvalTransitions[s]
	return known && (len(next) == 0 || slices.Equal(next, []ApprovalState{ApprovalExecuted}))
}

// ValidateTransition returns nil when a request may move from one state to
// another, and otherwise an error wrapping ErrInvalidTransition such as
// "invalid state transition: approved -> denied".
func ValidateTransition(from, to ApprovalState) error {
	next, known := approvalTransitions[from]
	if !known {
		return fmt.Errorf("%w: unknown state %q", ErrInvalidTransition, from)
	}
	if _, known := approvalTransitions[to]; !known {
		return fmt.Errorf("%w: unknown state %q", ErrInvalidTransition, to)
	}
	if !slices.Contains(next, to) {
		return fmt.Errorf("%w: %s -> %s", ErrInvalidTransition, from, to)
	}
	return nil
}

// ApprovalRequestID derives the id of the approval request for a call from
// what an approval binds: intent, arguments digest, requester and tenant. A
// retry of the same call gets the same id.
func ApprovalRequestID(intent, argsSHA256, requester, tenant string) string {
	doc, _ := json.Marshal([]string{intent, argsSHA256, requester, tenant}) // cannot fail for strings
	if canon, err := jcs.Transform(doc); err == nil {
		doc = canon
	} // else cannot happen for an array of strings: hash the plain encoding
	return "apr_" + middleware.DigestCanonical(doc)[:24] // the first 144 bits
}

// DefaultApprovalRequests bounds the requests a MemoryApprovalStore holds
// per tenant by default.
const DefaultApprovalRequests = 100_000

// MemoryApprovalStore is an ApprovalStore for one process. Every update is
// checked against the state machine: a change the machine does not allow is
// refused with ErrInvalidTransition and nothing is stored. A request past its
// expiry reads as expired, and creating a request with its id replaces it
// when it is Replaceable (the same call asked again after the old request
// lapsed, was cancelled or ran). Its capacity is per tenant: one tenant
// filling its share never refuses another tenant's requests.
type MemoryApprovalStore struct {
	mu  sync.Mutex
	max int
	now func() time.Time
	// reqs by id; tenants: the ids of each tenant, for its capacity and
	// its inbox; pending: the ids (and expiries) of each requester's
	// pending requests, for the quota.
	reqs    map[string]*ApprovalRequest
	tenants map[string]map[string]struct{}
	pending map[string]map[string]time.Time
}

// MemoryApprovalOptions tune a MemoryApprovalStore.
type MemoryApprovalOptions struct {
	// MaxRequests bounds the requests held per tenant
	// (DefaultApprovalRequests when zero). Requests past their retention
	// are dropped to make room; a tenant at its bound gets
	// ErrApprovalStoreFull, other tenants are unaffected.
	MaxRequests int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewMemoryApprovalStore returns an empty store.
func NewMemoryApprovalStore(o MemoryApprovalOptions) *MemoryApprovalStore {
	if o.MaxRequests <= 0 {
		o.MaxRequests = DefaultApprovalRequests
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &MemoryApprovalStore{max: o.MaxRequests, now: o.Now, reqs: make(map[string]*ApprovalRequest),
		tenants: make(map[string]map[string]struct{}), pending: make(map[string]map[string]time.Time)}
}

// requesterKey is the key of a requester's pending set.
func requesterKey(r *ApprovalRequest) string { return StateKey("apr", r.Tenant, r.Requester) }

// Create implements ApprovalStore. A new request must be pending.
func (s *MemoryApprovalStore) Create(ctx context.Context, req ApprovalRequest, quota int) (ApprovalRequest, bool, error) {
	if err := ctx.Err(); err != nil {
		return ApprovalRequest{}, false, err
	}
	if req.ID == "" {
		return ApprovalRequest{}, false, errors.New("approval request without id")
	}
	if req.State == "" {
		req.State = ApprovalPending
	}
	if req.State != ApprovalPending {
		return ApprovalRequest{}, false, fmt.Errorf("%w: a new request must be pending, not %s", ErrInvalidTransition, req.State)
	}
	req.Coalesced = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	old, exists := s.reqs[req.ID]
	if exists {
		s.expireLocked(old, now)
		if !old.Replaceable(now) {
			return cloneRequest(old), false, nil
		}
		req.Inherit(old)
	}
	rk := requesterKey(&req)
	if quota > 0 {
		set := s.pending[rk]
		oldest := time.Time{}
		for id, exp := range set {
			if r, ok := s.reqs[id]; !ok || r.State != ApprovalPending || lapsed(r, now) {
				delete(set, id)
				continue
			}
			if oldest.IsZero() || exp.Before(oldest) {
				oldest = exp
			}
		}
		if len(set) >= quota {
			return ApprovalRequest{}, false, &ApprovalQuotaError{RetryAfter: oldest.Sub(now)}
		}
	}
	ids := s.tenants[req.Tenant]
	if !exists && len(ids) >= s.max {
		s.purgeLocked(req.Tenant, now)
		if len(s.tenants[req.Tenant]) >= s.max {
			return ApprovalRequest{}, false, ErrApprovalStoreFull
		}
	}
	stored := cloneRequest(&req)
	s.reqs[req.ID] = &stored
	if s.tenants[req.Tenant] == nil {
		s.tenants[req.Tenant] = make(map[string]struct{})
	}
	s.tenants[req.Tenant][req.ID] = struct{}{}
	if s.pending[rk] == nil {
		s.pending[rk] = make(map[string]time.Time)
	}
	s.pending[rk][req.ID] = req.ExpiresAt
	return cloneRequest(&stored), true, nil
}

// Get implements ApprovalStore.
func (s *MemoryApprovalStore) Get(ctx context.Context, id string) (ApprovalRequest, error) {
	if err := ctx.Err(); err != nil {
		return ApprovalRequest{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[id]
	if !ok {
		return ApprovalRequest{}, ErrNotFound
	}
	s.expireLocked(r, s.now())
	return cloneRequest(r), nil
}

// Update implements ApprovalStore. fn works on a copy; the copy is stored
// only if fn succeeds, keeps the id and tenant, and changes the state (if at
// all) as the state machine allows.
func (s *MemoryApprovalStore) Update(ctx context.Context, id string, fn func(*ApprovalRequest) error) (ApprovalRequest, error) {
	if err := ctx.Err(); err != nil {
		return ApprovalRequest{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[id]
	if !ok {
		return ApprovalRequest{}, ErrNotFound
	}
	s.expireLocked(r, s.now())
	work := cloneRequest(r)
	if err := fn(&work); err != nil {
		return ApprovalRequest{}, err
	}
	if work.ID != r.ID || work.Tenant != r.Tenant || work.Requester != r.Requester {
		return ApprovalRequest{}, errors.New("an update must not change the request id, tenant or requester")
	}
	if work.State != r.State {
		if err := ValidateTransition(r.State, work.State); err != nil {
			return ApprovalRequest{}, err
		}
	} else if r.State.Terminal() {
		return ApprovalRequest{}, fmt.Errorf("%w: the request is already %s", ErrInvalidTransition, r.State)
	}
	work.Coalesced = 0
	stored := cloneRequest(&work)
	s.reqs[id] = &stored
	if stored.State != ApprovalPending {
		delete(s.pending[requesterKey(&stored)], id)
	}
	return cloneRequest(&stored), nil
}

// List implements ApprovalStore: requests matching f, oldest first, a page
// at a time. The cursor is the position (creation time, id) of the last
// request of the previous page.
func (s *MemoryApprovalStore) List(ctx context.Context, f ApprovalFilter, cursor string, limit int) ([]ApprovalRequest, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	limit = PageLimit(limit)
	var (
		afterNanos int64
		afterID    string
	)
	if cursor != "" {
		n, id, ok := strings.Cut(cursor, "|")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("%w: %q", ErrBadCursor, cursor)
		}
		afterNanos, afterID = v, id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []*ApprovalRequest
	visit := func(r *ApprovalRequest) {
		s.expireLocked(r, now)
		if !f.Matches(r) {
			return
		}
		if cursor != "" {
			n := r.CreatedAt.UnixNano()
			if n < afterNanos || (n == afterNanos && r.ID <= afterID) {
				return
			}
		}
		out = append(out, r)
	}
	if f.Tenant == "" && f.AnyTenant {
		for _, r := range s.reqs {
			visit(r)
		}
	} else {
		for id := range s.tenants[f.Tenant] {
			visit(s.reqs[id])
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = strconv.FormatInt(last.CreatedAt.UnixNano(), 10) + "|" + last.ID
	}
	page := make([]ApprovalRequest, len(out))
	for i, r := range out {
		page[i] = cloneRequest(r)
	}
	return page, next, nil
}

// expireLocked moves a pending request past its expiry to expired.
func (s *MemoryApprovalStore) expireLocked(r *ApprovalRequest, now time.Time) {
	if r.State == ApprovalPending && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		r.State = ApprovalExpired
		delete(s.pending[requesterKey(r)], r.ID)
	}
}

// lapsed reports whether a request is past its expiry, so that its id may be
// used again for a new request.
func lapsed(r *ApprovalRequest, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// purgeLocked drops the tenant's requests past their retention (expiry, or
// KeepUntil when later: a denial's veto and a void outlive the request).
func (s *MemoryApprovalStore) purgeLocked(tenant string, now time.Time) {
	ids := s.tenants[tenant]
	for id := range ids {
		r := s.reqs[id]
		if end := r.Retained(); !end.IsZero() && !now.Before(end) {
			delete(ids, id)
			delete(s.reqs, id)
			if set := s.pending[requesterKey(r)]; set != nil {
				delete(set, id)
				if len(set) == 0 {
					delete(s.pending, requesterKey(r))
				}
			}
		}
	}
}

// cloneRequest copies a request deeply, so callers never share its slices.
func cloneRequest(r *ApprovalRequest) ApprovalRequest {
	c := *r
	c.Roles = slices.Clone(r.Roles)
	c.Arguments = slices.Clone(r.Arguments)
	c.Decisions = slices.Clone(r.Decisions)
	c.Minted, c.Voided = slices.Clone(r.Minted), slices.Clone(r.Voided)
	for i := range c.Decisions {
		c.Decisions[i].Roles = slices.Clone(c.Decisions[i].Roles)
	}
	return c
}
