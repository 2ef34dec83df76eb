package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// tkReplayKey is the id under which the gates record tok as used.
func tkReplayKey(t testing.TB, tok string) string {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatal(err)
	}
	return gate.ReplayKey(c.Issuer, c.ID)
}

// tkCountingReplay counts the calls a gate makes to its replay store.
type tkCountingReplay struct {
	token.ReplayStore
	used, consume atomic.Int32
	mu            sync.Mutex
	batches       [][]string // the ids of each Consume
}

func newTkCountingReplay() *tkCountingReplay {
	return &tkCountingReplay{ReplayStore: token.NewMemoryReplayStore(token.MemoryReplayOptions{})}
}

func (s *tkCountingReplay) Consume(ctx context.Context, uses []token.Use) error {
	s.consume.Add(1)
	ids := make([]string, len(uses))
	for i, u := range uses {
		ids[i] = u.ID
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return s.ReplayStore.Consume(ctx, uses)
}

func (s *tkCountingReplay) Used(ctx context.Context, id string) (bool, error) {
	s.used.Add(1)
	return s.ReplayStore.Used(ctx, id)
}

func (s *tkCountingReplay) reset() {
	s.used.Store(0)
	s.consume.Store(0)
	s.mu.Lock()
	s.batches = nil
	s.mu.Unlock()
}

// tkUncomparableReplay is a replay store whose type cannot be compared with
// ==: a struct holding a slice, used by value.
type tkUncomparableReplay struct {
	token.ReplayStore
	tags []string
}

// TestNestedCallSpendsItsOwnToken: a tool that makes gated calls of its own
// with the context it was given must not slip their tokens into its own
// call's batch, which was already spent: each nested call spends its token.
func TestNestedCallSpendsItsOwnToken(t *testing.T) {
	f := newTkFixture(t)
	const refundArgs = `{"order_id":"o-1","amount":25}`
	const cancelArgs = `{"order_id":"o-9"}`
	inner := f.signEd(t, nil, f.claims(t, "order.refund", refundArgs))
	var (
		refunds atomic.Int32
		nested  []error
		chain   middleware.Invoker
	)
	chain = middleware.Build(middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		if c.Intent() != "order.cancel" {
			refunds.Add(1)
			return middleware.Result{}, nil
		}
		// The cancel tool refunds the order through the chain, three times.
		for range 3 {
			n := f.call("order.refund", refundArgs)
			n.Credentials.Confirmation = inner
			_, err := chain.Invoke(ctx, n)
			nested = append(nested, err)
		}
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), tkCommit)

	outer := f.call("order.cancel", cancelArgs)
	outer.Credentials.Confirmation = f.signEd(t, nil, f.claims(t, "order.cancel", cancelArgs))
	if _, err := chain.Invoke(t.Context(), outer); err != nil {
		t.Fatalf("outer call: %v", err)
	}
	if n := refunds.Load(); n != 1 {
		t.Fatalf("one confirmation token ran the nested refund %d times, want once", n)
	}
	if nested[0] != nil {
		t.Fatalf("first nested call: %v", nested[0])
	}
	for _, err := range nested[1:] {
		d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
		if d["reason"] != "already_used" || d["gate"] != gate.StageConfirmation {
			t.Fatalf("replayed nested call: %v", d)
		}
	}
	if used, _ := f.replay.Used(t.Context(), tkReplayKey(t, inner)); !used {
		t.Fatal("the nested call's token is not recorded as used")
	}
}

// TestParallelNestedCallsSpendOnce: nested calls made concurrently by the
// tool, all with the same token: exactly one runs (and, under -race, they
// share no batch).
func TestParallelNestedCallsSpendOnce(t *testing.T) {
	f := newTkFixture(t)
	const refundArgs = `{"order_id":"o-1","amount":25}`
	const cancelArgs = `{"order_id":"o-9"}`
	inner := f.signEd(t, nil, f.claims(t, "order.refund", refundArgs))
	const n = 20
	var (
		refunds atomic.Int32
		errs    = make([]error, n)
		chain   middleware.Invoker
	)
	chain = middleware.Build(middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		if c.Intent() != "order.cancel" {
			refunds.Add(1)
			return middleware.Result{}, nil
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := f.call("order.refund", refundArgs)
				c.Credentials.Confirmation = inner
				_, errs[i] = chain.Invoke(ctx, c)
			})
		}
		wg.Wait()
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), tkCommit)

	outer := f.call("order.cancel", cancelArgs)
	outer.Credentials.Confirmation = f.signEd(t, nil, f.claims(t, "order.cancel", cancelArgs))
	if _, err := chain.Invoke(t.Context(), outer); err != nil {
		t.Fatalf("outer call: %v", err)
	}
	passed := 0
	for _, err := range errs {
		if err == nil {
			passed++
			continue
		}
		if d := tkRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "already_used" {
			t.Fatalf("reason = %v, want already_used", d["reason"])
		}
	}
	if passed != 1 || refunds.Load() != 1 {
		t.Fatalf("%d of %d parallel nested calls passed and the refund ran %d times; want exactly 1", passed, n, refunds.Load())
	}
}

// TestTokensSpentInOneRoundTrip: the gates do not look tokens up before the
// commit; the commit spends the call's tokens in one Consume, and a replay
// is refused there with the gate, code and reason of the token.
func TestTokensSpentInOneRoundTrip(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	store := newTkCountingReplay()
	conf, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: a.verifier, Replay: store})
	if err != nil {
		t.Fatal(err)
	}
	av, _ := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: a.keys, MaxLifetime: token.DefaultApprovalLifetime})
	appr, err := gate.NewApproval(gate.ApprovalConfig{Verifier: av, Replay: store, Store: a.store})
	if err != nil {
		t.Fatal(err)
	}
	chain := middleware.Build(middleware.InvokerFunc(tkOK), nil, conf.Stage(), appr.Stage(), tkCommit)
	const args = `{"vault":"v1"}`
	confTok := a.signEd(t, nil, a.claims(t, "vault.open", args))
	apprTok := a.approval(t, "bob", []string{"admin"}, "vault.open", args)
	run := func(confirmation string, approvals ...string) error {
		c := a.call("vault.open", args)
		c.Credentials.Confirmation, c.Credentials.Approvals = confirmation, approvals
		_, err := chain.Invoke(ctx, c)
		return err
	}

	if err := run(confTok, apprTok); err != nil {
		t.Fatalf("confirmed and approved call: %v", err)
	}
	want := [][]string{{tkReplayKey(t, confTok), tkReplayKey(t, apprTok)}}
	if store.used.Load() != 0 || !slices.EqualFunc(store.batches, want, slices.Equal) {
		t.Fatalf("allowed call: %d Used, Consume batches %q; want no Used and one Consume of %q", store.used.Load(), store.batches, want)
	}

	// The confirmation again, with a fresh approval: refused at the commit
	// as the confirmation gate's replay, in one round trip.
	store.reset()
	err = run(confTok, a.approval(t, "carol", []string{"admin"}, "vault.open", args))
	d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	if d["reason"] != "already_used" || d["gate"] != gate.StageConfirmation {
		t.Fatalf("replayed confirmation: %v", d)
	}
	// Finding which of two tokens was replayed costs one lookup each, on
	// the refusal only.
	if c := store.consume.Load(); c != 1 {
		t.Errorf("replayed confirmation: %d Consume, want 1", c)
	}

	// A replayed approval alone: one Consume, no lookup.
	store.reset()
	c := a.call("vault.open", args)
	c.Credentials.Approvals = []string{apprTok}
	onlyApproval := middleware.Build(middleware.InvokerFunc(tkOK), nil, appr.Stage(), tkCommit)
	_, err = onlyApproval.Invoke(ctx, c)
	d = tkRefusal(t, err, axerr.CodeApprovalMissing, http.StatusPreconditionRequired)
	if d["gate"] != gate.StageApproval || tkJSON(t, d["rejected_tokens"]) != `[{"index":0,"reason":"already_used"}]` || d["count_received"] != 0 {
		t.Fatalf("replayed approval: %v", d)
	}
	if store.used.Load() != 0 || store.consume.Load() != 1 {
		t.Errorf("replayed approval: %d Used, %d Consume; want 0 and 1", store.used.Load(), store.consume.Load())
	}
}

// TestCheckReportsSpentTokens: no commit follows Check, so the gates look
// the ids up there to report a spent token precisely.
func TestCheckReportsSpentTokens(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	const args = `{"order_id":"o-1","amount":25}`
	tok := a.signEd(t, nil, a.claims(t, "order.refund", args))
	if err := a.replay.Consume(ctx, []token.Use{{ID: tkReplayKey(t, tok), Expires: jwtExp(t, tok)}}); err != nil {
		t.Fatal(err)
	}
	c := a.call("order.refund", args)
	c.Credentials.Confirmation = tok
	c.SetCheckOnly(true)
	if d := tkRefusal(t, a.pass(ctx, c), axerr.CodeConfirmationMissing, 428); d["reason"] != "already_used" {
		t.Fatalf("Check of a spent confirmation: %v", d)
	}

	bob := a.approval(t, "bob", []string{"admin"}, "vault.open", `{"vault":"v1"}`)
	if err := a.replay.Consume(ctx, []token.Use{{ID: tkReplayKey(t, bob), Expires: jwtExp(t, bob)}}); err != nil {
		t.Fatal(err)
	}
	c = a.call("vault.open", `{"vault":"v1"}`)
	c.Credentials.Approvals = []string{bob}
	c.SetCheckOnly(true)
	d := tkRefusal(t, a.run(ctx, c), axerr.CodeApprovalMissing, 428)
	if tkJSON(t, d["rejected_tokens"]) != `[{"index":0,"reason":"already_used"}]` {
		t.Fatalf("Check of a spent approval: %v", d)
	}
}

// jwtExp is the expiry of tok.
func jwtExp(t testing.TB, tok string) time.Time {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatal(err)
	}
	return c.ExpiresAt.Time
}

// TestTokensSpentPerStore: gates with different replay stores each spend
// their tokens in their own store; stores whose type cannot be compared
// work too (they never panic, and each gets its own Consume).
func TestTokensSpentPerStore(t *testing.T) {
	a := newTkApproval(t)
	const args = `{"vault":"v1"}`
	for name, stores := range map[string][2]token.ReplayStore{
		"two stores": {newTkCountingReplay(), newTkCountingReplay()},
		"uncomparable store type": {
			tkUncomparableReplay{ReplayStore: a.replay, tags: []string{"x"}},
			tkUncomparableReplay{ReplayStore: a.replay, tags: []string{"x"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: a.verifier, Replay: stores[0]})
			if err != nil {
				t.Fatal(err)
			}
			av, _ := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: a.keys, MaxLifetime: token.DefaultApprovalLifetime})
			appr, err := gate.NewApproval(gate.ApprovalConfig{Verifier: av, Replay: stores[1], Store: a.store})
			if err != nil {
				t.Fatal(err)
			}
			chain := middleware.Build(middleware.InvokerFunc(tkOK), nil, conf.Stage(), appr.Stage(), tkCommit)
			confTok := a.signEd(t, nil, a.claims(t, "vault.open", args))
			apprTok := a.approval(t, "bob", []string{"admin"}, "vault.open", args)
			c := a.call("vault.open", args)
			c.Credentials.Confirmation, c.Credentials.Approvals = confTok, []string{apprTok}
			if _, err := chain.Invoke(t.Context(), c); err != nil {
				t.Fatalf("call: %v", err)
			}
			for i, tok := range []string{confTok, apprTok} {
				if used, _ := stores[i].Used(t.Context(), tkReplayKey(t, tok)); !used {
					t.Errorf("token %d not spent in its gate's store", i)
				}
			}
			if s, ok := stores[0].(*tkCountingReplay); ok {
				if s.consume.Load() != 1 || stores[1].(*tkCountingReplay).consume.Load() != 1 {
					t.Error("want one Consume per store")
				}
			}
			// Replayed: refused at the commit by the gate whose token it is.
			c = a.call("vault.open", args)
			c.Credentials.Confirmation, c.Credentials.Approvals = a.signEd(t, nil, a.claims(t, "vault.open", args)), []string{apprTok}
			_, err = chain.Invoke(t.Context(), c)
			if d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428); d["gate"] != gate.StageApproval {
				t.Fatalf("replayed approval: %v", d)
			}
		})
	}
}

// TestReplayKey: the replay store records a fixed-length digest of issuer
// and jti, whatever the jti's length.
func TestReplayKey(t *testing.T) {
	f := newTkFixture(t)
	store := newTkCountingReplay()
	g, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: f.verifier, Replay: store})
	if err != nil {
		t.Fatal(err)
	}
	chain := middleware.Build(middleware.InvokerFunc(tkOK), nil, g.Stage(), tkCommit)
	const args = `{"order_id":"o-1","amount":25}`
	claims := f.claims(t, "order.refund", args)
	claims["jti"] = strings.Repeat("j", 4000)
	tok := f.signEd(t, nil, claims)
	c := f.call("order.refund", args)
	c.Credentials.Confirmation = tok
	if _, err := chain.Invoke(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	key := gate.ReplayKey(token.DefaultIssuer, claims["jti"].(string))
	if len(store.batches) != 1 || !slices.Equal(store.batches[0], []string{key}) || len(key) != 43 {
		t.Fatalf("recorded %q, want [%s] (43 characters)", store.batches, key)
	}
	if gate.ReplayKey("a", "bc") == gate.ReplayKey("ab", "c") || gate.ReplayKey("iss-1", "x") == gate.ReplayKey("iss-2", "x") {
		t.Fatal("replay keys of different (issuer, jti) pairs collide")
	}
	if c.Facts.ConfirmationJTI != claims["jti"] {
		t.Errorf("Facts.ConfirmationJTI = %.20q…, want the token's jti", c.Facts.ConfirmationJTI)
	}
}

// TestRefusalDetailsAreCopies: changing a refusal's details does not change
// the manifest.
func TestRefusalDetailsAreCopies(t *testing.T) {
	a := newTkApproval(t)
	c := a.call("order.refund", `{"order_id":"o-1","amount":25}`)
	e, _ := axerr.As(a.pass(t.Context(), c))
	e.Details["side_effects"].([]string)[0] = "changed"
	if got := a.m.Action("order.refund").SideEffects; got[0] != "payment_refunded" {
		t.Fatalf("the manifest's side_effects became %q", got)
	}
	for _, tokens := range [][]string{nil, {a.approval(t, "dave", []string{"clerk"}, "payout.send", tkPayout)}} {
		c = a.call("payout.send", tkPayout)
		c.Credentials.Approvals = tokens
		e, _ = axerr.As(a.run(t.Context(), c))
		e.Details["roles"].([]string)[0] = "changed"
		if got := a.m.Action("payout.send").ApprovalRoles; got[0] != "finance" {
			t.Fatalf("the manifest's approval_roles became %q (refusal %s)", got, e.Code)
		}
	}
	// And the rendered envelope still reads as JSON.
	if _, err := json.Marshal(e.Envelope()); err != nil {
		t.Fatal(err)
	}
}

// tkFailingUsed is a replay store whose lookups fail.
type tkFailingUsed struct{ token.ReplayStore }

func (tkFailingUsed) Used(context.Context, string) (bool, error) {
	return false, errors.New("dial tcp 10.0.0.9:6379: connection refused")
}

// TestSpentConfirmationAsksNoApprover: a call whose confirmation token is
// spent already would fail at the commit, so the approval gate, finding its
// approvals missing, refuses as the commit would and asks no approver to
// decide it: no approval request, no notification.
func TestSpentConfirmationAsksNoApprover(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	chain := middleware.Build(middleware.InvokerFunc(tkOK), nil, a.tkFixture.gate.Stage(), a.gate.Stage(), tkCommit)
	const args = `{"vault":"v7"}`
	if !a.tkFixture.gate.Required(a.m.Action("vault.open")) || !a.m.Action("vault.open").ApprovalRequired {
		t.Fatal("vault.open must need both confirmation and approval")
	}

	spent := a.signEd(t, nil, a.claims(t, "vault.open", args))
	if err := a.replay.Consume(ctx, []token.Use{{ID: tkReplayKey(t, spent), Expires: jwtExp(t, spent)}}); err != nil {
		t.Fatal(err)
	}
	c := a.call("vault.open", args)
	c.Credentials.Confirmation = spent
	_, err := chain.Invoke(ctx, c)
	d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	if d["reason"] != "already_used" || d["gate"] != gate.StageConfirmation {
		t.Fatalf("spent confirmation, no approvals: %v", d)
	}
	reqID := c.Facts.ApprovalRequestID
	if reqID == "" {
		t.Fatal("the approval gate did not see the call")
	}
	if _, err := a.store.Get(ctx, reqID); !errors.Is(err, gate.ErrNotFound) {
		t.Fatalf("approval request for a doomed call: err = %v, want ErrNotFound", err)
	}
	if n := a.notified.Load(); n != 0 {
		t.Fatalf("approvers notified %d times of a doomed call, want 0", n)
	}

	// A fresh confirmation without approvals: the request is recorded and
	// the approvers hear of it once.
	c = a.call("vault.open", args)
	c.Credentials.Confirmation = a.signEd(t, nil, a.claims(t, "vault.open", args))
	_, err = chain.Invoke(ctx, c)
	d = tkRefusal(t, err, axerr.CodeApprovalMissing, http.StatusPreconditionRequired)
	if d["approval_request_id"] != reqID || d["request_state"] != string(gate.ApprovalPending) || d["approvers_notified"] != true {
		t.Fatalf("fresh confirmation, no approvals: %v", d)
	}
	if req, err := a.store.Get(ctx, reqID); err != nil || req.State != gate.ApprovalPending {
		t.Fatalf("approval request = %+v, %v; want pending", req, err)
	}
	if n := a.notified.Load(); n != 1 {
		t.Fatalf("approvers notified %d times, want once", n)
	}

	// A replay store that cannot tell: fail closed, ask no one.
	conf, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: a.verifier, Replay: tkFailingUsed{token.NewMemoryReplayStore(token.MemoryReplayOptions{})}})
	if err != nil {
		t.Fatal(err)
	}
	failing := middleware.Build(middleware.InvokerFunc(tkOK), nil, conf.Stage(), a.gate.Stage(), tkCommit)
	const other = `{"vault":"v8"}`
	c = a.call("vault.open", other)
	c.Credentials.Confirmation = a.signEd(t, nil, a.claims(t, "vault.open", other))
	_, err = failing.Invoke(ctx, c)
	tkRefusal(t, err, axerr.CodeStoreUnavailable, http.StatusServiceUnavailable)
	if _, err := a.store.Get(ctx, c.Facts.ApprovalRequestID); !errors.Is(err, gate.ErrNotFound) {
		t.Fatalf("approval request despite the replay store failing: err = %v", err)
	}
	if n := a.notified.Load(); n != 1 {
		t.Fatalf("approvers notified %d times, want still once", n)
	}
}
