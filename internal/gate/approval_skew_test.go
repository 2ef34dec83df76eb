package gate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// skewed is approval gates of several replicas on one store, each with a
// clock of its own (the shared one plus a skew).
type skewed struct {
	*tkApproval
	mu    sync.Mutex
	base  time.Time
	store *gate.MemoryApprovalStore
	v     *token.Verifier
}

func newSkewed(t *testing.T) *skewed {
	s := &skewed{tkApproval: newTkApproval(t), base: time.Now()}
	s.store = gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{Now: s.clock(0)})
	var err error
	s.v, err = token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: s.keys, MaxLifetime: token.DefaultApprovalLifetime, Now: s.clock(0)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *skewed) clock(skew time.Duration) func() time.Time {
	return func() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.base.Add(skew) }
}

func (s *skewed) advance(d time.Duration) { s.mu.Lock(); s.base = s.base.Add(d); s.mu.Unlock() }

// replica is the gate of a replica whose clock is skew ahead.
func (s *skewed) replica(t *testing.T, skew time.Duration) *gate.Approval {
	g, err := gate.NewApproval(gate.ApprovalConfig{Verifier: s.v, Replay: s.persistent, Store: s.store,
		Issuer: token.Issuer{Signer: s.signer}, RequestTTL: time.Minute, Now: s.clock(skew)})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// runOn runs alice's vault.open call on g with the tokens.
func (s *skewed) runOn(g *gate.Approval, tokens ...string) (*middleware.Call, error) {
	c := s.call("vault.open", `{"vault":"main"}`)
	c.Credentials.Approvals = tokens
	_, err := g.Stage().Interceptor(context.Background(), c, middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ran"}, c.RunCommits(ctx)
	}))
	return c, err
}

var (
	skewBob   = middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"admin"}}
	skewCarol = middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"admin"}}
	skewDave  = middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"admin"}}
)

// TestApprovalRunVoidsTokensMintedOnASkewedReplica: the run of a call voids
// the approval tokens minted for its request before it, by jti, whatever the
// clocks. Here the replica that mints the tokens runs 10s ahead of the one
// that runs the call (within the verifier's 30s leeway): a token minted
// before the run carries an iat after the run's VoidBefore, and an iat rule
// alone would let it run the call a second time on the same request. With
// the minting replica 10s behind, a token minted after the run counts,
// though its iat is before the run's VoidBefore.
func TestApprovalRunVoidsTokensMintedOnASkewedReplica(t *testing.T) {
	for _, skew := range []time.Duration{10 * time.Second, -10 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			s := newSkewed(t)
			x, y := s.replica(t, 0), s.replica(t, skew) // y mints the tokens
			ctx := t.Context()

			c, _ := s.runOn(x) // request opened
			id := c.Facts.ApprovalRequestID
			_, tBob, _, err := y.Decide(ctx, skewBob, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			s.advance(61 * time.Second) // the approved request lapses (RequestTTL 1m)
			s.runOn(x)                  // the same call asked again: a new pending request, same id
			_, tCarol, _, err := y.Decide(ctx, skewCarol, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			s.advance(time.Second)
			if _, err := s.runOn(x, tBob); err != nil {
				t.Fatalf("first run: %v", err)
			}
			_, err = s.runOn(x, tCarol)
			assertVoid(t, err, "a token minted before the call ran on its request")

			// After the run, the call asked again and approved again: the
			// new token counts, even when its replica's clock is behind.
			s.advance(time.Second)
			s.runOn(x)
			_, tDave, _, err := y.Decide(ctx, skewDave, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.runOn(x, tDave); err != nil {
				t.Fatalf("a token minted after the run: %v", err)
			}
		})
	}
}

// TestApprovalVoidBeforeLeewayForTokensMintedOutsideDecide: a token the
// request does not know (signed with TokenIssuer.Approval, not by Decide) is
// void when issued up to the verifier's leeway after the run (its signer's
// clock may be that far ahead); one issued later counts.
func TestApprovalVoidBeforeLeewayForTokensMintedOutsideDecide(t *testing.T) {
	s := newSkewed(t)
	x := s.replica(t, 0)
	ctx := t.Context()
	c, _ := s.runOn(x)
	id := c.Facts.ApprovalRequestID
	_, tBob, _, err := x.Decide(ctx, skewBob, id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	outside := func(skew time.Duration) string {
		t.Helper()
		req, err := s.store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := token.Issuer{Signer: s.signer, Now: s.clock(skew)}.Approval("carol", []string{"admin"}, grantOf(req), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	early := outside(10 * time.Second) // signed now, on a clock 10s ahead
	if _, err := s.runOn(x, tBob); err != nil {
		t.Fatalf("first run: %v", err)
	}
	_, err = s.runOn(x, early)
	assertVoid(t, err, "a token signed outside Decide before the call ran, on a clock ahead")

	s.advance(s.v.Leeway() + 2*time.Second)
	if _, err := s.runOn(x, outside(0)); err != nil {
		t.Fatalf("a token signed outside Decide past the leeway after the run: %v", err)
	}
}

// assertVoid checks that err refuses a call because its only approval
// token is void.
func assertVoid(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s still counted: the call ran twice on one request", what)
	}
	d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if got := tkJSON(t, d["rejected_tokens"]); got != `[{"index":0,"reason":"void"}]` {
		t.Fatalf("%s: rejected_tokens = %s, want the token void", what, got)
	}
}
