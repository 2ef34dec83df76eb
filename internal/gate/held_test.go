package gate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// heldClock is a clock tests move by hand.
type heldClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *heldClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *heldClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// heldChain is the confirmation and approval gates with decision pages,
// their commit and a tool that counts its runs, on one clock.
type heldChain struct {
	f     *tkFixture
	clock *heldClock
	appr  *gate.Approval
	store *flakyApprovals
	runs  int
	chain middleware.Invoker
}

func newHeldChain(t *testing.T) *heldChain {
	t.Helper()
	h := &heldChain{f: newTkFixture(t), clock: &heldClock{now: time.Now()}}
	h.store = &flakyApprovals{ApprovalStore: gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{Now: h.clock.Now})}
	store := h.store
	var err error
	h.appr, err = gate.NewApproval(gate.ApprovalConfig{
		Replay: h.f.persistent, Store: store, Issuer: token.Issuer{Signer: h.f.signer, Now: h.clock.Now},
		Now: h.clock.Now, Pages: "https://ops.example/", ConfirmationLifetime: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: h.f.verifier, Replay: h.f.persistent, Requests: h.appr})
	if err != nil {
		t.Fatal(err)
	}
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		h.runs++
		return middleware.Result{}, nil
	})
	h.chain = middleware.Build(tool, nil, conf.Stage(), h.appr.Stage(), gate.Commit())
	return h
}

// flakyApprovals fails the next Update when failNext is set, before it
// writes anything (a timeout, say).
type flakyApprovals struct {
	gate.ApprovalStore
	failNext atomic.Bool
}

func (s *flakyApprovals) Update(ctx context.Context, id string, fn func(*gate.ApprovalRequest) error) (gate.ApprovalRequest, error) {
	if s.failNext.CompareAndSwap(true, false) {
		return gate.ApprovalRequest{}, errors.New("store timed out")
	}
	return s.ApprovalStore.Update(ctx, id, fn)
}

// refund calls order.refund as alice and returns the refusal's details (nil
// when it ran).
func (h *heldChain) refund(t *testing.T) map[string]any {
	t.Helper()
	_, err := h.chain.Invoke(t.Context(), h.f.call("order.refund", `{"order_id":"o-1","amount":5}`))
	if err == nil {
		return nil
	}
	e, ok := axerr.As(err)
	if !ok || e.Code != axerr.CodeConfirmationMissing {
		t.Fatalf("refusal %v", err)
	}
	return e.Envelope().Error.Details
}

// TestConfirmedRequestLapses: a confirmation decided on the page may be run
// on for the confirmation lifetime; after it, the repeat opens a new
// request.
func TestConfirmedRequestLapses(t *testing.T) {
	h := newHeldChain(t)
	id := h.refund(t)["decision_id"].(string)
	if _, _, _, err := h.appr.Decide(t.Context(), h.f.alice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	h.clock.add(5*time.Minute + time.Second)
	d := h.refund(t)
	if d == nil || d["request_state"] != "pending" || d["decision_id"] != id || h.runs != 0 {
		t.Fatalf("repeat after the confirmation lapsed: %v, ran %d", d, h.runs)
	}
	if _, _, _, err := h.appr.Decide(t.Context(), h.f.alice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	h.clock.add(4 * time.Minute)
	if d := h.refund(t); d != nil || h.runs != 1 {
		t.Fatalf("repeat within the lifetime: %v, ran %d", d, h.runs)
	}
}

// TestDeclinedRequestLapses: a denial refuses the same call (declined) for
// the confirmation lifetime and the leeway; then the call opens a new
// request.
func TestDeclinedRequestLapses(t *testing.T) {
	h := newHeldChain(t)
	id := h.refund(t)["decision_id"].(string)
	if _, _, _, err := h.appr.Decide(t.Context(), h.f.alice, id, false, "no"); err != nil {
		t.Fatal(err)
	}
	h.clock.add(4 * time.Minute)
	if d := h.refund(t); d["reason"] != "declined" || d["request_state"] != "denied" {
		t.Fatalf("within the denial: %v", d)
	}
	h.clock.add(2 * time.Minute)
	if d := h.refund(t); d["reason"] != nil || d["request_state"] != "pending" {
		t.Fatalf("after the denial lapsed: %v", d)
	}
	if h.runs != 0 {
		t.Fatalf("ran %d", h.runs)
	}
}

// TestExecutedAfterAStoreHiccup: the decision is spent with the tokens; when
// the approval store fails to record the run, the change is tried again, so
// the call runs and the request does not stay approved with its decision
// used up.
func TestExecutedAfterAStoreHiccup(t *testing.T) {
	h := newHeldChain(t)
	id := h.refund(t)["decision_id"].(string)
	if _, _, _, err := h.appr.Decide(t.Context(), h.f.alice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	h.store.failNext.Store(true)
	if d := h.refund(t); d != nil || h.runs != 1 {
		t.Fatalf("repeat over a store hiccup: %v, ran %d", d, h.runs)
	}
	if d := h.refund(t); d["request_state"] != "pending" || h.runs != 1 {
		t.Fatalf("the next repeat: %v, ran %d; want a new request", d, h.runs)
	}
}
