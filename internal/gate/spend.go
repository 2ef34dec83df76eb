package gate

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// replayRefusal builds a gate's refusal for tokens that turn out, at the
// commit, to be used already. indexes are the positions of those tokens
// among the ones the gate read (always 0 for the one confirmation token).
type replayRefusal func(indexes []int) *axerr.Error

// pendingUse is a verified token waiting to be marked used at the commit.
type pendingUse struct {
	use   token.Use
	index int
	// refusal is shared by the tokens one gate spends in one call, and
	// compared by pointer to tell the gates apart.
	refusal *replayRefusal
}

// spendGroup is the tokens of one call to be marked used in one store.
type spendGroup struct {
	store token.ReplayStore
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
func spend(ctx context.Context, call *middleware.Call, store token.ReplayStore, uses ...pendingUse) context.Context {
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
func (b *spendBatch) group(store token.ReplayStore) *spendGroup {
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
func sameStore(a, b token.ReplayStore) bool {
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
	uses := make([]token.Use, len(g.uses))
	for i, u := range g.uses {
		uses[i] = u.use
	}
	err := g.store.Consume(ctx, uses)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, token.ErrReplayed):
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

// tokenError is a token refusal with its reason and cause.
func tokenError(r token.Reason, err error) *token.Error { return &token.Error{Reason: r, Err: err} }

// issuedBeforeStart refuses (reasons.TokenIssuedBeforeStart) a token issued
// before store started remembering spent tokens: a store that forgets across
// restarts (token.MemoryReplayStore) says since when it remembers with a
// RemembersSince method, and a token older than that may have been spent
// by the process before, unknown to it. A store without the method (Redis)
// remembers every id until its token expires: nil.
//
// iat has whole seconds (a JWT NumericDate), so it is compared with the
// second the store was made in: a token issued in that second is accepted,
// or every token minted right after a start would be refused.
func issuedBeforeStart(store token.ReplayStore, c *token.Claims) *token.Error {
	f, ok := store.(interface{ RemembersSince() time.Time })
	if !ok || c.IssuedAt == nil {
		return nil
	}
	if c.IssuedAt.Before(f.RemembersSince().Truncate(time.Second)) {
		return tokenError(reasons.TokenIssuedBeforeStart, nil)
	}
	return nil
}
