package gates

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultReplayEntries bounds a MemoryReplayStore by default.
const DefaultReplayEntries = 1 << 20

// ErrReplayStoreFull is returned when a MemoryReplayStore holds as many
// unexpired ids as it may. Forgetting an unexpired id would let its token be
// replayed, so the store refuses instead (and the gate fails closed).
var ErrReplayStoreFull = errors.New("replay store is full")

// MemoryReplayStore is a ReplayStore for one process: used token ids with
// their expiry, bounded in size, expired ids dropped as new ones arrive. Its
// zero value is not usable; call NewMemoryReplayStore.
type MemoryReplayStore struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	expires map[string]time.Time
	byTime  expiryHeap
}

// MemoryReplayOptions tune a MemoryReplayStore.
type MemoryReplayOptions struct {
	// MaxEntries bounds the ids held (DefaultReplayEntries when zero).
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
	return &MemoryReplayStore{max: o.MaxEntries, now: o.Now, expires: make(map[string]time.Time)}
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
	s.purgeLocked(now)
	if len(s.expires)+len(uses) > s.max {
		return ErrReplayStoreFull
	}
	for _, u := range uses {
		if !u.Expires.After(now) {
			// Already expired: no token with this id can pass any more.
			continue
		}
		s.expires[u.ID] = u.Expires
		heap.Push(&s.byTime, expiryEntry{id: u.ID, at: u.Expires})
	}
	return nil
}

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
	exp, ok := s.expires[id]
	return ok && exp.After(now)
}

// purgeLocked drops every expired id, oldest first.
func (s *MemoryReplayStore) purgeLocked(now time.Time) {
	for len(s.byTime) > 0 && !s.byTime[0].at.After(now) {
		e := heap.Pop(&s.byTime).(expiryEntry)
		if exp, ok := s.expires[e.id]; ok && exp.Equal(e.at) {
			delete(s.expires, e.id)
		}
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
	*h = old[:len(old)-1]
	return e
}
