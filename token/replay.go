package token

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// defaultReplayEntries bounds a memoryReplayStore per tenant by default.
const defaultReplayEntries = 1 << 20

// ErrReplayStoreFull is returned when the memory store holds as many
// unexpired ids of a tenant as it may. Forgetting an unexpired id would let
// its token be replayed, so the store refuses instead (and the gate fails
// closed).
var ErrReplayStoreFull = errors.New("token: replay store is full")

// Purging bounds of memoryReplayStore: each call forgets at most
// replayPurgeBatch expired ids, and replayPurgeFull more when the caller's
// tenant is full, so that no call pays for a mass expiry (200,000 tokens
// once stalled one call for 188 ms); a store whose backing arrays are four
// times larger than needed is compacted.
const (
	replayPurgeBatch = 256
	replayPurgeFull  = 4096
	replayShrinkMin  = 1024
)

// memoryReplayStore is a ReplayStore for one process.
//
// It knows only the tokens spent since it was made: those spent by an
// earlier process (before a restart) are forgotten. So that a restart does
// not make them spendable again, it reports when it was made
// (RemembersSince) and the gates refuse every token issued before then
// (reasons.TokenIssuedBeforeStart): a restart voids the outstanding tokens. A
// store that keeps its ids across restarts (Redis with persistence) keeps
// them valid.
//
// It holds used token ids with their expiry; expired ids are dropped a
// bounded number at a time as new ones arrive, and the memory they held is
// given back. Its capacity is kept per tenant (TokenUse.Tenant, the tokens'
// tenant claim): each tenant holds at most MaxEntries ids, so a tenant
// filling its share never refuses another tenant's tokens. Its zero value
// is not usable; call NewMemoryReplayStore.
type memoryReplayStore struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	since   time.Time
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

// MemoryReplayOptions tune a memoryReplayStore.
type MemoryReplayOptions struct {
	// MaxEntries bounds the ids held per tenant (1<<20 when
	// zero).
	MaxEntries int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewMemoryReplayStore returns an empty replay store for one process: used
// ids are forgotten once their token has expired.
func NewMemoryReplayStore(o MemoryReplayOptions) ReplayStore {
	if o.MaxEntries <= 0 {
		o.MaxEntries = defaultReplayEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &memoryReplayStore{max: o.MaxEntries, now: o.Now, since: o.Now(), expires: make(map[string]replayEntry), tenants: make(map[string]int)}
}

// RemembersSince returns when the store was made: it knows nothing of the
// tokens spent before then. The gates refuse a token issued before it
// (reasons.TokenIssuedBeforeStart).
func (s *memoryReplayStore) RemembersSince() time.Time { return s.since }

// Consume implements ReplayStore: all ids are recorded, or none. An id given
// twice in one batch counts as a replay.
func (s *memoryReplayStore) Consume(ctx context.Context, uses []Use) error {
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
func (s *memoryReplayStore) roomLocked(uses []Use) bool {
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
func (s *memoryReplayStore) Used(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(id, s.now()), nil
}

// Len returns the number of ids held, expired ones not yet dropped included.
func (s *memoryReplayStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expires)
}

func (s *memoryReplayStore) liveLocked(id string, now time.Time) bool {
	e, ok := s.expires[id]
	return ok && e.at.After(now)
}

// purgeLocked drops expired ids, oldest first, at most limit heap entries.
func (s *memoryReplayStore) purgeLocked(now time.Time, limit int) {
	for n := 0; n < limit && len(s.byTime) > 0 && !s.byTime[0].at.After(now); n++ {
		e := heap.Pop(&s.byTime).(expiryEntry)
		s.purged++
		if cur, ok := s.expires[e.id]; ok && cur.at.Equal(e.at) {
			delete(s.expires, e.id)
			s.uncountLocked(cur.tenant)
		}
	}
}

func (s *memoryReplayStore) uncountLocked(tenant string) {
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
func (s *memoryReplayStore) compactLocked() {
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

// ErrReplayed is returned by ReplayStore.Consume when a token id was
// already used.
var ErrReplayed = errors.New("token: already used")

// TokenUse is one token id to mark used until it expires.
type Use struct {
	ID      string
	Expires time.Time
	// Tenant is the tenant the token was issued for (its tenant claim,
	// which the gates require to be the caller's). A memory store keeps its
	// capacity per tenant by it; "" is the share of callers without one.
	Tenant string
}

// ReplayStore records the ids (jti) of used single-use tokens until they expire.
//
// A store that forgets the ids recorded before some time (one that lives in
// memory: a restart empties it) must also have a method
//
//	RemembersSince() time.Time
//
// returning that time, as NewMemoryReplayStore's does: the gates then refuse
// every token issued before it (reasons.TokenIssuedBeforeStart), which the store could
// not tell from a token already spent. A store without it is trusted to
// remember every id until its token expires.
type ReplayStore interface {
	// Consume records every id atomically: if any of them was already
	// recorded it returns ErrReplayed and records none, so of many concurrent
	// presentations of one token exactly one succeeds.
	Consume(ctx context.Context, uses []Use) error
	// Used reports whether id was recorded (for an early, precise refusal; the
	// authoritative check is Consume).
	Used(ctx context.Context, id string) (bool, error)
}
