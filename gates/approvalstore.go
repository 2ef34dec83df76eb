package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
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
// decided once, and terminal states are final.
var approvalTransitions = map[ApprovalState][]ApprovalState{
	ApprovalPending:   {ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCancelled},
	ApprovalApproved:  {},
	ApprovalDenied:    {},
	ApprovalExpired:   {},
	ApprovalCancelled: {},
}

// Terminal reports whether s is final.
func (s ApprovalState) Terminal() bool {
	next, known := approvalTransitions[s]
	return known && len(next) == 0
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

// DefaultApprovalRequests bounds a MemoryApprovalStore by default.
const DefaultApprovalRequests = 100_000

// MemoryApprovalStore is an ApprovalStore for one process. Every update is
// checked against the state machine: a change the machine does not allow is
// refused with ErrInvalidTransition and nothing is stored. A request past its
// expiry reads as expired, and creating a request with its id replaces it (the
// same call asked again after the old request lapsed).
type MemoryApprovalStore struct {
	mu   sync.Mutex
	max  int
	now  func() time.Time
	reqs map[string]*ApprovalRequest
}

// MemoryApprovalOptions tune a MemoryApprovalStore.
type MemoryApprovalOptions struct {
	// MaxRequests bounds the requests held (DefaultApprovalRequests when
	// zero). Requests past their expiry are dropped to make room.
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
	return &MemoryApprovalStore{max: o.MaxRequests, now: o.Now, reqs: make(map[string]*ApprovalRequest)}
}

// Create implements ApprovalStore. A new request must be pending.
func (s *MemoryApprovalStore) Create(ctx context.Context, req ApprovalRequest) (ApprovalRequest, bool, error) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if old, ok := s.reqs[req.ID]; ok && !lapsed(old, now) {
		s.expireLocked(old, now)
		return cloneRequest(old), false, nil
	}
	if _, ok := s.reqs[req.ID]; !ok && len(s.reqs) >= s.max {
		s.purgeLocked(now)
		if len(s.reqs) >= s.max {
			return ApprovalRequest{}, false, ErrApprovalStoreFull
		}
	}
	stored := cloneRequest(&req)
	s.reqs[req.ID] = &stored
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
// only if fn succeeds, keeps the id, and changes the state (if at all) as
// the state machine allows.
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
	if work.ID != r.ID {
		return ApprovalRequest{}, errors.New("an update must not change the request id")
	}
	if work.State != r.State {
		if err := ValidateTransition(r.State, work.State); err != nil {
			return ApprovalRequest{}, err
		}
	} else if r.State.Terminal() {
		return ApprovalRequest{}, fmt.Errorf("%w: the request is already %s", ErrInvalidTransition, r.State)
	}
	stored := cloneRequest(&work)
	s.reqs[id] = &stored
	return cloneRequest(&stored), nil
}

// List implements ApprovalStore: requests matching f, oldest first.
func (s *MemoryApprovalStore) List(ctx context.Context, f ApprovalFilter) ([]ApprovalRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []ApprovalRequest
	for _, r := range s.reqs {
		s.expireLocked(r, now)
		if !f.Matches(r) {
			continue
		}
		out = append(out, cloneRequest(r))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// expireLocked moves a pending request past its expiry to expired.
func (s *MemoryApprovalStore) expireLocked(r *ApprovalRequest, now time.Time) {
	if r.State == ApprovalPending && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		r.State = ApprovalExpired
	}
}

// lapsed reports whether a request is past its expiry, so that its id may be
// used again for a new request.
func lapsed(r *ApprovalRequest, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

func (s *MemoryApprovalStore) purgeLocked(now time.Time) {
	for id, r := range s.reqs {
		if lapsed(r, now) {
			delete(s.reqs, id)
		}
	}
}

// cloneRequest copies a request deeply, so callers never share its slices.
func cloneRequest(r *ApprovalRequest) ApprovalRequest {
	c := *r
	c.Roles = slices.Clone(r.Roles)
	c.Arguments = slices.Clone(r.Arguments)
	c.Decisions = slices.Clone(r.Decisions)
	for i := range c.Decisions {
		c.Decisions[i].Roles = slices.Clone(c.Decisions[i].Roles)
	}
	return c
}
