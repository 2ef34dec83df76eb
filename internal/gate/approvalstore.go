package gate

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/axgate/axgate/middleware"
)

// ErrApprovalStoreFull is returned when a MemoryApprovalStore holds as many
// live requests as it may.
var ErrApprovalStoreFull = errors.New("gates: approval store is full")

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
func Terminal(s ApprovalState) bool {
	next, known := approvalTransitions[s]
	return known && (len(next) == 0 || slices.Equal(next, []ApprovalState{ApprovalExecuted}))
}

// ValidateTransition returns nil when a request may move from one state to
// another, and otherwise an error wrapping ErrInvalidTransition such as
// "gates: invalid state transition: approved -> denied".
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

// ApprovalRequestID derives the id of the approval request for a call.
//
// It hashes what an approval binds: intent, arguments digest, requester,
// tenant and the call's scope (middleware.Call.Scope; "" leaves it out, so
// that the ids of unscoped calls stay as they were). A retry of the same
// call gets the same id.
func ApprovalRequestID(intent, argsSHA256, requester, tenant, scope string) string {
	fields := []string{intent, argsSHA256, requester, tenant}
	if scope != "" {
		fields = append(fields, "scope", scope)
	}
	doc, _ := json.Marshal(fields) // cannot fail for strings
	if canon, err := jcs.Transform(doc); err == nil {
		doc = canon
	} // else cannot happen for an array of strings: hash the plain encoding
	return "apr_" + middleware.DigestCanonical(doc)[:24] // the first 144 bits
}

// DefaultApprovalRequests bounds the requests a MemoryApprovalStore holds
// per tenant by default.
const DefaultApprovalRequests = 100_000

// DefaultApprovalBytes bounds the bytes of call arguments a
// MemoryApprovalStore holds per tenant by default.
const DefaultApprovalBytes = 64 << 20

// approvalPurgeBatch is how many lapsed records each store call drops at
// most (besides the ones it needs to make room): the work of a call stays
// bounded, and records are dropped about as fast as they are made.
const approvalPurgeBatch = 8

// MemoryApprovalStore is an ApprovalStore for one process.
//
// Every update is checked against the state machine: a change the machine
// does not allow is refused with ErrInvalidTransition and nothing is stored.
// A request past its expiry reads as expired, and creating a request with its
// id replaces it when it is Replaceable (the same call asked again after the
// old request lapsed, was cancelled or ran). Its capacity is per tenant, in
// requests and in bytes of arguments: one tenant filling its share never
// refuses another tenant's requests, and each tenant has its own lock, so one
// tenant's inbox never waits for another's.
//
// Records are dropped as soon as nothing needs them: a request cancelled or
// expired that voids no token at once, any other when it is past its
// retention (Retained). A request that is decided for good keeps only what
// its veto or void needs (its arguments are dropped). A tenant holding no
// record takes no memory.
type MemoryApprovalStore struct {
	max, maxBytes int
	now           func() time.Time
	// mu guards shards and where; a shard's own lock is taken first when
	// both are held.
	mu     sync.RWMutex
	shards map[string]*approvalShard
	where  map[string]*approvalShard // request id -> its tenant's shard
	// listed counts the records List examined (for tests of its cost).
	listed atomic.Int64
}

// approvalShard is one tenant's requests.
type approvalShard struct {
	mu     sync.Mutex
	tenant string
	dead   bool // dropped from the store: a caller that finds it looks again
	reqs   map[string]*approvalEntry
	bytes  int // of the arguments held
	// order: every record, by (creation time, id), for the inbox pages.
	order []*approvalEntry
	// due: every record, by the end of its retention, for the purge.
	due approvalHeap
	// pending: the ids of each requester's requests that count in the
	// quota (pending ones, and their decided confirmation requests:
	// QuotaUntil), with until when they count.
	pending map[string]map[string]time.Time
}

type approvalEntry struct {
	r    ApprovalRequest
	heap int // index in due
}

// approvalHeap is a min-heap of records by the end of their retention.
type approvalHeap []*approvalEntry

func (h approvalHeap) Len() int { return len(h) }
func (h approvalHeap) Less(i, j int) bool {
	return Retained(&h[i].r).Before(Retained(&h[j].r))
}
func (h approvalHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heap, h[j].heap = i, j
}
func (h *approvalHeap) Push(x any) {
	e := x.(*approvalEntry)
	e.heap = len(*h)
	*h = append(*h, e)
}
func (h *approvalHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heap = -1
	return e
}

// MemoryApprovalOptions tune a MemoryApprovalStore.
type MemoryApprovalOptions struct {
	// MaxRequests bounds the requests held per tenant
	// (DefaultApprovalRequests when zero). Requests past their retention
	// are dropped to make room; a tenant at its bound gets
	// ErrApprovalStoreFull, other tenants are unaffected.
	MaxRequests int
	// MaxBytes bounds the bytes of call arguments held per tenant
	// (DefaultApprovalBytes when zero): the arguments of a request are
	// held until it is decided for good. A tenant at its bound gets
	// ErrApprovalStoreFull, other tenants are unaffected.
	MaxBytes int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewMemoryApprovalStore returns an empty store.
func NewMemoryApprovalStore(o MemoryApprovalOptions) *MemoryApprovalStore {
	if o.MaxRequests <= 0 {
		o.MaxRequests = DefaultApprovalRequests
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultApprovalBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &MemoryApprovalStore{max: o.MaxRequests, maxBytes: o.MaxBytes, now: o.Now,
		shards: make(map[string]*approvalShard), where: make(map[string]*approvalShard)}
}

// requesterKey is the key of a requester's pending set.
func requesterKey(r *ApprovalRequest) string { return StateKey("apr", r.Tenant, r.Requester) }

// shard returns the tenant's shard, locked (created if need be).
func (s *MemoryApprovalStore) shard(tenant string) *approvalShard {
	for {
		s.mu.RLock()
		sh := s.shards[tenant]
		s.mu.RUnlock()
		if sh == nil {
			s.mu.Lock()
			if sh = s.shards[tenant]; sh == nil {
				sh = &approvalShard{tenant: tenant, reqs: make(map[string]*approvalEntry), pending: make(map[string]map[string]time.Time)}
				s.shards[tenant] = sh
			}
			s.mu.Unlock()
		}
		sh.mu.Lock()
		if !sh.dead {
			return sh
		}
		sh.mu.Unlock()
	}
}

// lookup returns the shard holding id, locked, and its record; nil when no
// record has the id.
func (s *MemoryApprovalStore) lookup(id string) (*approvalShard, *approvalEntry) {
	s.mu.RLock()
	sh := s.where[id]
	s.mu.RUnlock()
	if sh == nil {
		return nil, nil
	}
	sh.mu.Lock()
	e := sh.reqs[id]
	if e == nil {
		sh.mu.Unlock()
		return nil, nil
	}
	return sh, e
}

// release unlocks sh, dropping it from the store when it holds nothing.
func (s *MemoryApprovalStore) release(sh *approvalShard) {
	if len(sh.reqs) == 0 {
		s.mu.Lock()
		if s.shards[sh.tenant] == sh {
			delete(s.shards, sh.tenant)
		}
		s.mu.Unlock()
		sh.dead = true
	}
	sh.mu.Unlock()
}

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
	sh := s.shard(req.Tenant)
	defer s.release(sh)
	now := s.now()
	s.purge(sh, now, approvalPurgeBatch)
	old := sh.reqs[req.ID]
	if old == nil {
		s.mu.RLock()
		other := s.where[req.ID]
		s.mu.RUnlock()
		if other != nil && other != sh {
			// Ids are derived from the tenant: the same id in another
			// tenant is a caller's mistake, never a replacement.
			return ApprovalRequest{}, false, errors.New("approval request id held by another tenant")
		}
	}
	if old != nil {
		sh.expire(&old.r, now)
		if !old.r.Replaceable(now) {
			return cloneRequest(&old.r), false, nil
		}
		req.Inherit(&old.r)
	}
	rk := requesterKey(&req)
	if quota > 0 {
		set := sh.pending[rk]
		oldest := time.Time{}
		for id, exp := range set {
			if e, ok := sh.reqs[id]; !ok || !CountsInQuota(&e.r, now) {
				delete(set, id)
				continue
			}
			if oldest.IsZero() || exp.Before(oldest) {
				oldest = exp
			}
		}
		if len(set) >= quota {
			return ApprovalRequest{}, false, &QuotaError{RetryAfter: oldest.Sub(now)}
		}
	}
	held, heldBytes := len(sh.reqs), sh.bytes
	if old != nil {
		held, heldBytes = held-1, heldBytes-len(old.r.Arguments)
	}
	for held >= s.max || heldBytes+len(req.Arguments) > s.maxBytes {
		// Make room with records past their retention, one at a time.
		if s.purge(sh, now, 1) == 0 {
			return ApprovalRequest{}, false, ErrApprovalStoreFull
		}
		if old != nil && sh.reqs[req.ID] == nil {
			old = nil // the purge dropped it
		}
		held, heldBytes = len(sh.reqs), sh.bytes
		if old != nil {
			held, heldBytes = held-1, heldBytes-len(old.r.Arguments)
		}
	}
	if old != nil {
		s.remove(sh, old)
	}
	e := &approvalEntry{r: cloneRequest(&req)}
	s.insert(sh, e)
	if sh.pending[rk] == nil {
		sh.pending[rk] = make(map[string]time.Time)
	}
	sh.pending[rk][req.ID] = req.ExpiresAt
	return cloneRequest(&e.r), true, nil
}

// Get implements ApprovalStore.
func (s *MemoryApprovalStore) Get(ctx context.Context, id string) (ApprovalRequest, error) {
	if err := ctx.Err(); err != nil {
		return ApprovalRequest{}, err
	}
	sh, e := s.lookup(id)
	if sh == nil {
		return ApprovalRequest{}, ErrNotFound
	}
	defer s.release(sh)
	sh.expire(&e.r, s.now())
	return cloneRequest(&e.r), nil
}

// Update implements ApprovalStore. fn works on a copy; the copy is stored
// only if fn succeeds, keeps the id and tenant, and changes the state (if at
// all) as the state machine allows.
func (s *MemoryApprovalStore) Update(ctx context.Context, id string, fn func(*ApprovalRequest) error) (ApprovalRequest, error) {
	if err := ctx.Err(); err != nil {
		return ApprovalRequest{}, err
	}
	sh, e := s.lookup(id)
	if sh == nil {
		return ApprovalRequest{}, ErrNotFound
	}
	defer s.release(sh)
	now := s.now()
	r := &e.r
	sh.expire(r, now)
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
	} else if Terminal(r.State) {
		return ApprovalRequest{}, fmt.Errorf("%w: the request is already %s", ErrInvalidTransition, r.State)
	}
	work.Coalesced = 0
	if !work.CreatedAt.Equal(r.CreatedAt) {
		// The record moves in the inbox order.
		s.remove(sh, e)
		e = &approvalEntry{r: cloneRequest(&work)}
		s.insert(sh, e)
	} else {
		sh.bytes += len(work.Arguments) - len(r.Arguments)
		e.r = cloneRequest(&work)
		heap.Fix(&sh.due, e.heap)
	}
	if !CountsInQuota(&e.r, now) {
		sh.unpend(&e.r)
	} else if set := sh.pending[requesterKey(&e.r)]; set != nil {
		set[id] = QuotaUntil(&e.r) // the quota's retry_after follows a new expiry
	} else {
		sh.pending[requesterKey(&e.r)] = map[string]time.Time{id: QuotaUntil(&e.r)}
	}
	out := cloneRequest(&e.r)
	sh.settle(e)
	if vanishes(&e.r, now) {
		s.remove(sh, e)
	}
	s.purge(sh, now, approvalPurgeBatch)
	return out, nil
}

// vanishes reports whether nothing needs r any more: it was cancelled or
// lapsed, voids no token and holds no live token minted for it, so it is
// dropped at once (it no longer counts against its tenant's share). A
// request whose approvers minted tokens is kept while they live, so that the
// request replacing it carries them over and the next run voids them
// (keeping it costs an approver's decision, not a caller's cancel).
func vanishes(r *ApprovalRequest, now time.Time) bool {
	switch r.State {
	case ApprovalCancelled, ApprovalExpired:
		return r.VoidBefore.IsZero() && !now.Before(r.KeepUntil) && !anyLive(r.Minted, now) && !anyLive(r.Voided, now)
	}
	return false
}

// anyLive reports whether any of ts can still be presented at now.
func anyLive(ts []MintedToken, now time.Time) bool {
	for _, t := range ts {
		if now.Before(t.Until) {
			return true
		}
	}
	return false
}

// List implements ApprovalStore: requests matching f, oldest first, a page
// at a time. The cursor is the position (creation time, id) of the last
// request of the previous page. A tenant's page costs the records it
// skips and returns, not the tenant's whole share.
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
	var tenants []string
	if f.Tenant == "" && f.AnyTenant {
		s.mu.RLock()
		for t := range s.shards {
			tenants = append(tenants, t)
		}
		s.mu.RUnlock()
	} else {
		tenants = []string{f.Tenant}
	}
	var out []ApprovalRequest
	for _, t := range tenants {
		s.mu.RLock()
		sh := s.shards[t]
		s.mu.RUnlock()
		if sh == nil {
			continue
		}
		sh.mu.Lock()
		if !sh.dead {
			out = append(out, s.page(sh, f, cursor != "", afterNanos, afterID, limit+1)...)
		}
		sh.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return before(&out[i], &out[j]) })
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = strconv.FormatInt(last.CreatedAt.UnixNano(), 10) + "|" + last.ID
	}
	return out, next, nil
}

// page returns up to n copies of the shard's records matching f after the
// cursor position, oldest first.
func (s *MemoryApprovalStore) page(sh *approvalShard, f ApprovalFilter, after bool, afterNanos int64, afterID string, n int) []ApprovalRequest {
	now := s.now()
	s.purge(sh, now, approvalPurgeBatch)
	i := 0
	if after {
		i = sort.Search(len(sh.order), func(i int) bool {
			c := sh.order[i].r.CreatedAt.UnixNano()
			return c > afterNanos || (c == afterNanos && sh.order[i].r.ID > afterID)
		})
	}
	var out []ApprovalRequest
	for ; i < len(sh.order) && len(out) < n; i++ {
		s.listed.Add(1)
		r := &sh.order[i].r
		sh.expire(r, now)
		if Matches(f, r) {
			out = append(out, cloneRequest(r))
		}
	}
	return out
}

// before orders records by (creation time, id).
func before(a, b *ApprovalRequest) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// insert adds e to the shard and the store's index.
func (s *MemoryApprovalStore) insert(sh *approvalShard, e *approvalEntry) {
	sh.reqs[e.r.ID] = e
	sh.bytes += len(e.r.Arguments)
	i, _ := slices.BinarySearchFunc(sh.order, e, func(a, b *approvalEntry) int {
		switch {
		case before(&a.r, &b.r):
			return -1
		case before(&b.r, &a.r):
			return 1
		}
		return 0
	})
	sh.order = slices.Insert(sh.order, i, e)
	heap.Push(&sh.due, e)
	s.mu.Lock()
	s.where[e.r.ID] = sh
	s.mu.Unlock()
}

// remove drops e from the shard and the store's index.
func (s *MemoryApprovalStore) remove(sh *approvalShard, e *approvalEntry) {
	delete(sh.reqs, e.r.ID)
	sh.bytes -= len(e.r.Arguments)
	sh.unpend(&e.r)
	i, found := slices.BinarySearchFunc(sh.order, e, func(a, b *approvalEntry) int {
		switch {
		case before(&a.r, &b.r):
			return -1
		case before(&b.r, &a.r):
			return 1
		}
		return 0
	})
	if found && sh.order[i] == e {
		sh.order = slices.Delete(sh.order, i, i+1)
	}
	if e.heap >= 0 {
		heap.Remove(&sh.due, e.heap)
	}
	s.mu.Lock()
	if s.where[e.r.ID] == sh {
		delete(s.where, e.r.ID)
	}
	s.mu.Unlock()
}

// purge drops up to n of the shard's records past their retention, the
// longest lapsed first, and returns how many it dropped.
func (s *MemoryApprovalStore) purge(sh *approvalShard, now time.Time, n int) int {
	dropped := 0
	for dropped < n && len(sh.due) > 0 {
		e := sh.due[0]
		if end := Retained(&e.r); end.IsZero() || now.Before(end) {
			break
		}
		s.remove(sh, e)
		dropped++
	}
	return dropped
}

// expire moves a pending request past its expiry to expired.
func (sh *approvalShard) expire(r *ApprovalRequest, now time.Time) {
	if r.State == ApprovalPending && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		r.State = ApprovalExpired
		sh.unpend(r)
		sh.bytes -= len(r.Arguments) // not needed once lapsed
		r.Arguments = nil
	}
}

// settle drops the arguments of a request decided for good: only its veto
// or void is still needed.
func (sh *approvalShard) settle(e *approvalEntry) {
	if Terminal(e.r.State) && e.r.State != ApprovalApproved && e.r.Arguments != nil {
		sh.bytes -= len(e.r.Arguments)
		e.r.Arguments = nil
	}
}

// unpend takes r out of its requester's pending set.
func (sh *approvalShard) unpend(r *ApprovalRequest) {
	rk := requesterKey(r)
	if set := sh.pending[rk]; set != nil {
		delete(set, r.ID)
		if len(set) == 0 {
			delete(sh.pending, rk)
		}
	}
}

// lapsed reports whether a request is past its expiry, so that its id may be
// used again for a new request.
func lapsed(r *ApprovalRequest, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
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
