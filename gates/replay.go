package gates

import (
	"container/heap"
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// DefaultReplayEntries bounds a MemoryReplayStore per tenant by default.
const DefaultReplayEntries = 1 << 20

// ErrReplayStoreFull is returned when a MemoryReplayStore holds as many
// unexpired ids of a tenant as it may. Forgetting an unexpired id would let
// its token be replayed, so the store refuses instead (and the gate fails
// closed).
var ErrReplayStoreFull = errors.New("replay store is full")

// Purging bounds of MemoryReplayStore: each call forgets at most
// replayPurgeBatch expired ids, and replayPurgeFull more when the caller's
// tenant is full, so that no call pays for a mass expiry (200,000 tokens
// once stalled one call for 188 ms); a store whose backing arrays are four
// times larger than needed is compacted.
const (
	replayPurgeBatch = 256
	replayPurgeFull  = 4096
	replayShrinkMin  = 1024
)

// MemoryReplayStore is a ReplayStore for one process: used token ids with
// their expiry, expired ids dropped a bounded number at a time as new ones
// arrive, and the memory they held given back. Its capacity is kept per
// tenant (TokenUse.Tenant, the tokens' tenant claim): each tenant holds at
// most MaxEntries ids, so a tenant filling its share never refuses another
// tenant's tokens. Its zero value is not usable; call NewMemoryReplayStore.
type MemoryReplayStore struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	expires map[string]replayEntry
	// peak is the most ids the map held since it was last rebuilt: a Go
	// map never gives back its buckets, so once it holds a quarter of that
	// it is rebuilt.
	peak    int
	tenants map[string]int
	byTime  expiryHeap
	// purged is how many ids the last call purged (for tests).
	purged int
}

type replayEntry struct {
	at     time.Time
	tenant string
}

// MemoryReplayOptions tune a MemoryReplayStore.
type MemoryReplayOptions struct {
	// MaxEntries bounds the ids held per tenant (DefaultReplayEntries when
	// zero).
	MaxEntries int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewMemoryReplayStore returns an empty store.
func NewMemoryReplayStore(o MemoryReplayOptions) *MemoryReplayStore {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultReplayEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &MemoryReplayStore{max: o.MaxEntries, now: o.Now, expires: make(map[string]replayEntry), tenants: make(map[string]int)}
}

// Consume implements ReplayStore: all ids are recorded, or none. An id given
// twice in one batch counts as a replay.
func (s *MemoryReplayStore) Consume(ctx context.Context, uses []TokenUse) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.purged = 0
	for i, u := range uses {
		if s.liveLocked(u.ID, now) {
			return ErrReplayed
		}
		for _, v := range uses[:i] {
			if v.ID == u.ID {
				return ErrReplayed
			}
		}
	}
	s.purgeLocked(now, replayPurgeBatch)
	if !s.roomLocked(uses) {
		// Maybe the tenant's ids are expired but not yet purged: look
		// further, still a bounded number.
		s.purgeLocked(now, replayPurgeFull)
		if !s.roomLocked(uses) {
			s.compactLocked()
			return ErrReplayStoreFull
		}
	}
	for _, u := range uses {
		exp := u.Expires
		if !exp.After(now) {
			// The token expired between its check at the gate and this
			// commit. Calls that checked it in time may still be on their
			// way here, so it is recorded for a while all the same: exactly
			// one of them runs.
			exp = now.Add(expiredTokenGrace)
		}
		if old, ok := s.expires[u.ID]; ok {
			// An expired id not yet purged, used again: its old heap entry
			// no longer matches and will be skipped.
			s.uncountLocked(old.tenant)
		}
		s.expires[u.ID] = replayEntry{at: exp, tenant: u.Tenant}
		s.tenants[u.Tenant]++
		heap.Push(&s.byTime, expiryEntry{id: u.ID, at: exp})
	}
	s.peak = max(s.peak, len(s.expires))
	s.compactLocked()
	return nil
}

// roomLocked reports whether the ids of uses fit in their tenants' shares.
func (s *MemoryReplayStore) roomLocked(uses []TokenUse) bool {
	if len(uses) == 1 {
		return s.tenants[uses[0].Tenant]+1 <= s.max
	}
	need := make(map[string]int, 1)
	for _, u := range uses {
		need[u.Tenant]++
	}
	for t, n := range need {
		if s.tenants[t]+n > s.max {
			return false
		}
	}
	return true
}

// expiredTokenGrace is how long a token that was already past its expiry
// at the commit stays recorded: longer than any call takes from its token
// gate to its commit.
const expiredTokenGrace = 5 * time.Minute

// Used implements ReplayStore.
func (s *MemoryReplayStore) Used(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(id, s.now()), nil
}

// Len returns the number of ids held, expired ones not yet dropped included.
func (s *MemoryReplayStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expires)
}

func (s *MemoryReplayStore) liveLocked(id string, now time.Time) bool {
	e, ok := s.expires[id]
	return ok && e.at.After(now)
}

// purgeLocked drops expired ids, oldest first, at most limit heap entries.
func (s *MemoryReplayStore) purgeLocked(now time.Time, limit int) {
	for n := 0; n < limit && len(s.byTime) > 0 && !s.byTime[0].at.After(now); n++ {
		e := heap.Pop(&s.byTime).(expiryEntry)
		s.purged++
		if cur, ok := s.expires[e.id]; ok && cur.at.Equal(e.at) {
			delete(s.expires, e.id)
			s.uncountLocked(cur.tenant)
		}
	}
}

func (s *MemoryReplayStore) uncountLocked(tenant string) {
	if n := s.tenants[tenant] - 1; n > 0 {
		s.tenants[tenant] = n
	} else {
		delete(s.tenants, tenant)
	}
}

// compactLocked gives memory back once the store holds a quarter of what
// it once did: the heap's backing array is reallocated to fit, and the map
// (which never shrinks by itself) rebuilt. Each costs a copy of what is
// left, at most once per halving of the size, so amortized O(1) per id.
func (s *MemoryReplayStore) compactLocked() {
	if c := cap(s.byTime); c > replayShrinkMin && len(s.byTime) < c/4 {
		h := make(expiryHeap, len(s.byTime), 2*len(s.byTime))
		copy(h, s.byTime)
		s.byTime = h
	}
	if s.peak > replayShrinkMin && len(s.expires) < s.peak/4 {
		m := make(map[string]replayEntry, len(s.expires))
		for k, v := range s.expires {
			m[k] = v
		}
		s.expires = m
		s.peak = len(m)
	}
}

type expiryEntry struct {
	id string
	at time.Time
}

// expiryHeap is a min-heap of ids by expiry.
type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	// Clear the slot: the backing array keeps it, and with it the id
	// string, until the slice grows over it again.
	old[len(old)-1] = expiryEntry{}
	*h = old[:len(old)-1]
	return e
}

// ReplayKey is the id under which the gates record a token as used in a
// ReplayStore: the base64url SHA-256 (middleware.DigestCanonical) of the
// issuer, length-prefixed, and the jti. It is 43 characters long whatever the
// jti (which may be kilobytes), and two issuers that happen to use the same
// jti do not spend each other's tokens.
func ReplayKey(issuer, jti string) string {
	b := make([]byte, 0, 24+len(issuer)+len(jti))
	b = strconv.AppendInt(b, int64(len(issuer)), 10)
	b = append(b, ':')
	b = append(b, issuer...)
	b = append(b, jti...)
	return middleware.DigestCanonical(b)
}

// replayRefusal builds a gate's refusal for tokens that turn out, at the
// commit, to be used already. indexes are the positions of those tokens
// among the ones the gate read (always 0 for the one confirmation token).
type replayRefusal func(indexes []int) *axerr.Error

// pendingUse is a verified token waiting to be marked used at the commit.
type pendingUse struct {
	use   TokenUse
	index int
	// refusal is shared by the tokens one gate spends in one call, and
	// compared by pointer to tell the gates apart.
	refusal *replayRefusal
}

// spendGroup is the tokens of one call to be marked used in one store.
type spendGroup struct {
	store ReplayStore
	uses  []pendingUse
}

// spendBatch gathers the tokens one call spends, so that they are marked
// used together, right before the tool runs. It travels in the context from
// the first token gate to the later ones, tied to its call: a gated call that
// the tool makes with the context it was given is another Call and gets a
// batch of its own, even when many run at once.
//
// Tokens whose gates share a replay store (the same store value) are spent
// in one atomic Consume. Gates configured with different stores, or with a
// store whose type cannot be compared with ==, get one Consume per store, in
// gate order: no store can be atomic across stores, so if a later store
// finds a replay, the tokens an earlier store recorded stay spent.
type spendBatch struct {
	call      *middleware.Call
	groups    []*spendGroup
	committed bool
}

type spendKey struct{}

// spend adds tokens to the call's batch for store, creating the batch and
// registering its commit on the call on first use, and returns the context
// that carries the batch to the later gates.
func spend(ctx context.Context, call *middleware.Call, store ReplayStore, uses ...pendingUse) context.Context {
	b, _ := ctx.Value(spendKey{}).(*spendBatch)
	if b == nil || b.call != call || b.committed {
		b = &spendBatch{call: call}
		call.OnCommit(b.commit)
		ctx = context.WithValue(ctx, spendKey{}, b)
	}
	g := b.group(store)
	g.uses = append(g.uses, uses...)
	return ctx
}

// group returns the batch's group for store, creating it.
func (b *spendBatch) group(store ReplayStore) *spendGroup {
	for _, g := range b.groups {
		if sameStore(g.store, store) {
			return g
		}
	}
	g := &spendGroup{store: store}
	b.groups = append(b.groups, g)
	return g
}

// sameStore reports whether a and b are the same store value. It never
// panics: values of a type == cannot compare (a struct holding a slice or a
// func) are never the same.
func sameStore(a, b ReplayStore) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && va.Equal(vb)
}

// commit marks the batch's tokens used, one Consume per store.
func (b *spendBatch) commit(ctx context.Context) error {
	b.committed = true
	for _, g := range b.groups {
		if err := g.consume(ctx, b.call); err != nil {
			return err
		}
	}
	return nil
}

func (g *spendGroup) consume(ctx context.Context, call *middleware.Call) error {
	uses := make([]TokenUse, len(g.uses))
	for i, u := range g.uses {
		uses[i] = u.use
	}
	err := g.store.Consume(ctx, uses)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrReplayed):
		return StoreUnavailable(call.Intent(), "the token replay store", err)
	}
	return g.replayed(ctx)
}

// replayed is the refusal for a Consume that found a replay: that of the
// first gate with a token already used, naming all of that gate's used
// tokens. With one token there is nothing to look up; with several, each is
// looked up (on this refusal only).
func (g *spendGroup) replayed(ctx context.Context) *axerr.Error {
	hits := g.uses[:1]
	if len(g.uses) > 1 {
		var found []pendingUse
		for _, u := range g.uses {
			if used, err := g.store.Used(ctx, u.use.ID); err == nil && used {
				found = append(found, u)
			}
		}
		if len(found) > 0 {
			// Otherwise the batch repeated an id, or the store cannot
			// tell: blame the first token.
			hits = found
		}
	}
	return refusalFor(hits)
}

// pendingBatch returns the batch of tokens that call's earlier gates left to
// be spent at its commit, or nil.
func pendingBatch(ctx context.Context, call *middleware.Call) *spendBatch {
	b, _ := ctx.Value(spendKey{}).(*spendBatch)
	if b == nil || b.call != call || b.committed {
		return nil
	}
	return b
}

// spentAlready looks the batch's tokens up in their stores, one Used per
// token. If one is used already, the call will fail at the commit whatever
// happens next, and it returns the refusal the commit would give, so that a
// later gate (the approval gate, behind the confirmation gate) asks no one
// to decide a doomed call. It returns nil, nil for a nil batch or when no
// token is used, and StoreUnavailable when a store cannot tell (fail
// closed). Only a gate's refusal path calls it: a call that goes on is
// checked once, by Consume at the commit.
func (b *spendBatch) spentAlready(ctx context.Context) (*axerr.Error, error) {
	if b == nil {
		return nil, nil
	}
	for _, g := range b.groups {
		var hits []pendingUse
		for _, u := range g.uses {
			used, err := g.store.Used(ctx, u.use.ID)
			if err != nil {
				return nil, StoreUnavailable(b.call.Intent(), "the token replay store", err)
			}
			if used {
				hits = append(hits, u)
			}
		}
		if len(hits) > 0 {
			return refusalFor(hits), nil
		}
	}
	return nil, nil
}

// refusalFor is the refusal of the gate of the first of hits (tokens found
// used), naming that gate's tokens among them.
func refusalFor(hits []pendingUse) *axerr.Error {
	first := hits[0].refusal
	var indexes []int
	for _, h := range hits {
		if h.refusal == first {
			indexes = append(indexes, h.index)
		}
	}
	return (*first)(indexes)
}
