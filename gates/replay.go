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
		exp := u.Expires
		if !exp.After(now) {
			// The token expired between its check at the gate and this
			// commit. Calls that checked it in time may still be on their
			// way here, so it is recorded for a while all the same: exactly
			// one of them runs.
			exp = now.Add(expiredTokenGrace)
		}
		s.expires[u.ID] = exp
		heap.Push(&s.byTime, expiryEntry{id: u.ID, at: exp})
	}
	return nil
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
