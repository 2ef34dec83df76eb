package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func newTestIdempotencyStore(maxKeys int) (*MemoryIdempotencyStore, *fakeClock) {
	clk := newFakeClock()
	s := NewMemoryIdempotencyStore(maxKeys)
	s.now = clk.Now
	return s, clk
}

func TestMemoryIdempotencyStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestIdempotencyStore(0)

	rec, claim, err := s.Begin(ctx, testOwner, "k", "digest-1", time.Minute)
	if err != nil || claim == "" || rec != nil {
		t.Fatalf("first Begin: %v, %q, %v; want claimed", rec, claim, err)
	}
	rec, other, err := s.Begin(ctx, testOwner, "k", "digest-2", time.Minute)
	if err != nil || other != "" || rec == nil || rec.State != IdempotencyInFlight || rec.ArgsSHA256 != "digest-1" {
		t.Fatalf("Begin while in flight: %+v, %q, %v; want the in-flight record of digest-1", rec, other, err)
	}
	if err := s.Complete(ctx, testOwner, "k", claim, IdempotencyOutcome{Result: json.RawMessage(`{"order_id":"o-1"}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// A completed record is no longer in flight: it cannot be released.
	if err := s.Release(ctx, testOwner, "k", claim); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release of a completed record: %v; want ErrNotFound", err)
	}
	// Completing renews the record for the window, past the lease.
	clk.Advance(30 * time.Minute)
	rec, other, _ = s.Begin(ctx, testOwner, "k", "digest-1", time.Minute)
	if other != "" || rec.State != IdempotencyDone || string(rec.Result) != `{"order_id":"o-1"}` || rec.Refusal != nil {
		t.Fatalf("Begin after Complete: %+v, %q; want the done record", rec, other)
	}
	// The copy is the caller's: changing it does not change the store.
	rec.Result[0] = 'X'
	if rec, _, _ = s.Begin(ctx, testOwner, "k", "digest-1", time.Minute); string(rec.Result) != `{"order_id":"o-1"}` {
		t.Fatalf("stored result changed through a returned copy: %s", rec.Result)
	}
	clk.Advance(31 * time.Minute)
	if _, claim, _ = s.Begin(ctx, testOwner, "k", "digest-3", time.Minute); claim == "" {
		t.Fatal("Begin after the window: not claimed")
	}
	if err := s.Release(ctx, testOwner, "k", claim); err != nil {
		t.Fatal(err)
	}
	if _, claim, _ = s.Begin(ctx, testOwner, "k", "digest-4", time.Minute); claim == "" {
		t.Fatal("Begin after Release: not claimed")
	}
	if err := s.Release(ctx, testOwner, "never-held", "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release of a key not held: %v; want ErrNotFound", err)
	}
}

func TestMemoryIdempotencyStoreKeepsRefusals(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestIdempotencyStore(0)
	_, claim, _ := s.Begin(ctx, testOwner, "k", "d", time.Minute)
	refusal := json.RawMessage(`{"error":{"code":"AXGATE_TOOL_FAILED"}}`)
	if err := s.Complete(ctx, testOwner, "k", claim, IdempotencyOutcome{Refusal: refusal}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := s.Begin(ctx, testOwner, "k", "d", time.Minute)
	if rec == nil || rec.State != IdempotencyDone || string(rec.Refusal) != string(refusal) || rec.Result != nil {
		t.Fatalf("record after a refusal: %+v; want done with the refusal", rec)
	}
}

// TestMemoryIdempotencyStoreStaleClaim: a claim whose lease ended can
// neither complete nor release the key once another call claimed it.
func TestMemoryIdempotencyStoreStaleClaim(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestIdempotencyStore(0)
	_, stale, _ := s.Begin(ctx, testOwner, "k", "d", time.Minute)
	clk.Advance(time.Minute)
	if err := s.Complete(ctx, testOwner, "k", stale, IdempotencyOutcome{Result: json.RawMessage(`1`)}, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Complete after the lease: %v; want ErrNotFound", err)
	}
	_, fresh, _ := s.Begin(ctx, testOwner, "k", "d", time.Minute)
	if fresh == "" || fresh == stale {
		t.Fatalf("Begin after the lease: claim %q (stale %q); want a new claim", fresh, stale)
	}
	if err := s.Release(ctx, testOwner, "k", stale); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release with the stale claim: %v; want ErrNotFound", err)
	}
	if err := s.Complete(ctx, testOwner, "k", stale, IdempotencyOutcome{Result: json.RawMessage(`1`)}, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Complete with the stale claim: %v; want ErrNotFound", err)
	}
	if rec, claim, _ := s.Begin(ctx, testOwner, "k", "d", time.Minute); claim != "" || rec.State != IdempotencyInFlight {
		t.Fatalf("the fresh claim was disturbed: %+v, %q", rec, claim)
	}
	if err := s.Complete(ctx, testOwner, "k", fresh, IdempotencyOutcome{Result: json.RawMessage(`2`)}, time.Hour); err != nil {
		t.Fatalf("Complete with the fresh claim: %v", err)
	}
}

func TestMemoryIdempotencyStoreOneClaimUnderConcurrency(t *testing.T) {
	s, _ := newTestIdempotencyStore(0)
	var claims atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, claim, err := s.Begin(context.Background(), testOwner, "k", "d", time.Minute)
				if err != nil {
					t.Error(err)
				}
				if claim != "" {
					claims.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := claims.Load(); n != 1 {
		t.Fatalf("%d claims of one key; want exactly 1", n)
	}
}

func TestMemoryIdempotencyStoreBounded(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestIdempotencyStore(3)
	for i := range 3 {
		if _, claim, err := s.Begin(ctx, testOwner, fmt.Sprint("k", i), "d", time.Minute); err != nil || claim == "" {
			t.Fatalf("key %d: %q, %v", i, claim, err)
		}
	}
	if _, _, err := s.Begin(ctx, testOwner, "k3", "d", time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("fourth live key: %v; want ErrStoreFull", err)
	}
	clk.Advance(time.Minute)
	if _, claim, err := s.Begin(ctx, testOwner, "k3", "d", time.Minute); err != nil || claim == "" {
		t.Fatalf("after expiry: %q, %v; want claimed", claim, err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d; want the expired records swept", n)
	}
}

func TestMemoryIdempotencyStoreRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestIdempotencyStore(0)
	if _, _, err := s.Begin(ctx, testOwner, "k", "d", 0); err == nil {
		t.Error("Begin with ttl 0: no error")
	}
	if err := s.Complete(ctx, testOwner, "k", "c", IdempotencyOutcome{}, -time.Second); err == nil {
		t.Error("Complete with negative ttl: no error")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Begin(cancelled, testOwner, "k", "d", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Begin with a cancelled context: %v", err)
	}
}

func TestNewIdempotencyRejectsBadOptions(t *testing.T) {
	store := NewMemoryIdempotencyStore(0)
	for name, o := range map[string]IdempotencyOptions{
		"no store":                  {},
		"negative window":           {Store: store, Window: -time.Second},
		"negative lease":            {Store: store, Lease: -time.Second},
		"negative duplicate window": {Store: store, DuplicateWindow: -time.Second},
		"unknown policy":            {Store: store, Duplicates: DuplicatePolicy(9)},
	} {
		if _, err := NewIdempotency(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	g, err := NewIdempotency(IdempotencyOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if g.window != DefaultIdempotencyWindow || g.lease != DefaultIdempotencyLease || g.dupWindow != DefaultDuplicateWindow || g.dup != DuplicateWarn {
		t.Fatalf("defaults not applied: %+v", g)
	}
}

// commitThenRun stands for the end of the standard chain: the commit stage
// (deferred work), then the tool boundary, which marks the call executed.
func commitThenRun(tool func(ctx context.Context, call *middleware.Call) (middleware.Result, error)) middleware.Invoker {
	commit := middleware.Stage{Name: "commit", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if err := call.RunCommits(ctx); err != nil {
			return middleware.Result{}, err
		}
		return next.Invoke(ctx, call)
	}}
	return middleware.Build(middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		call.MarkExecuted()
		return tool(ctx, call)
	}), nil, commit)
}

// TestIdempotencyStaleClaimLeavesANewerOneAlone: call A outlives its lease,
// call B claims the key and completes; when A then fails — before its tool
// ran (released) or after (its outcome stored) — B's record stays, and a
// retry C gets B's result: the tool ran twice (A and B), never a third time.
func TestIdempotencyStaleClaimLeavesANewerOneAlone(t *testing.T) {
	for _, aFails := range []string{"before the tool", "in the tool"} {
		t.Run(aFails, func(t *testing.T) {
			store, clk := newTestIdempotencyStore(0)
			g, err := NewIdempotency(IdempotencyOptions{Store: store, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var inv middleware.Invoker
			var runs atomic.Int32
			newCall := func() *middleware.Call {
				c := middleware.NewCall("order_place", json.RawMessage(`{"sku":"A"}`), middleware.Principal{ID: "alice", Tenant: "acme"})
				c.Action = &manifest.Action{Intent: "order.place", Idempotent: new(false)}
				c.Credentials.IdempotencyKey = "k-1"
				return c
			}
			// B runs while A is stuck past its lease.
			runB := func(ctx context.Context) {
				clk.Advance(2 * time.Minute)
				if res, err := inv.Invoke(ctx, newCall()); err != nil || res.Value != "B" {
					t.Fatalf("call B: %v, %v; want it to run", res.Value, err)
				}
			}
			var first atomic.Bool
			first.Store(true)
			slowCommit := middleware.Stage{Name: "spend", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
				if aFails == "before the tool" && first.CompareAndSwap(true, false) {
					call.OnCommit(func(ctx context.Context) error {
						runB(ctx)
						return axerr.New(axerr.CodeConfirmationMissing, "token already used")
					})
				}
				return next.Invoke(ctx, call)
			}}
			tail := commitThenRun(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
				if runs.Add(1) == 1 && aFails == "in the tool" {
					runB(ctx)
					return middleware.Result{}, errors.New("provider down")
				}
				return middleware.Result{Value: "B"}, nil
			})
			inv = middleware.Build(tail, nil, g.Stage(), slowCommit)
			if _, err := inv.Invoke(context.Background(), newCall()); err == nil {
				t.Fatal("call A succeeded; want it to fail")
			}
			c := newCall()
			res, err := inv.Invoke(context.Background(), c)
			if err != nil || !c.Facts.Replayed || string(res.Value.(json.RawMessage)) != `"B"` {
				t.Fatalf("retry C: %v, %v, replayed %v; want B's stored result", res.Value, err, c.Facts.Replayed)
			}
			want := int32(1)
			if aFails == "in the tool" {
				want = 2
			}
			if n := runs.Load(); n != want {
				t.Fatalf("the tool ran %d times; want %d", n, want)
			}
		})
	}
}

// TestIdempotencyInAChainThatDoesNotMarkExecution: in a chain of the user's
// own that never calls MarkExecuted, a successful result is still kept and
// replayed (a failure counts as never run).
func TestIdempotencyInAChainThatDoesNotMarkExecution(t *testing.T) {
	g, err := NewIdempotency(IdempotencyOptions{Store: NewMemoryIdempotencyStore(0)})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	inv := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		runs.Add(1)
		return middleware.Result{Value: "placed"}, nil
	}), nil, g.Stage())
	for i := range 2 {
		c := middleware.NewCall("order_place", json.RawMessage(`{"sku":"A"}`), middleware.Principal{ID: "alice"})
		c.Action = &manifest.Action{Intent: "order.place", Idempotent: new(false)}
		c.Credentials.IdempotencyKey = "k-1"
		res, err := inv.Invoke(context.Background(), c)
		if err != nil || (i == 1 && (!c.Facts.Replayed || string(res.Value.(json.RawMessage)) != `"placed"`)) {
			t.Fatalf("call %d: %v, %v, replayed %v", i+1, res.Value, err, c.Facts.Replayed)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
}

// TestIdempotencyResultThatCannotBeStored: the caller gets the tool's result
// (it happened) with a warning; a retry with the key is refused rather than
// run again.
func TestIdempotencyResultThatCannotBeStored(t *testing.T) {
	g, err := NewIdempotency(IdempotencyOptions{Store: NewMemoryIdempotencyStore(0)})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	inv := middleware.Build(commitThenRun(func(context.Context, *middleware.Call) (middleware.Result, error) {
		runs.Add(1)
		return middleware.Result{Value: make(chan int)}, nil
	}), nil, g.Stage())
	newCall := func() *middleware.Call {
		c := middleware.NewCall("order_place", json.RawMessage(`{"sku":"A"}`), middleware.Principal{ID: "alice"})
		c.Action = &manifest.Action{Intent: "order.place", Idempotent: new(false)}
		c.Credentials.IdempotencyKey = "k-1"
		return c
	}
	c := newCall()
	res, err := inv.Invoke(context.Background(), c)
	if err != nil || res.Value == nil || len(c.Facts.Warnings) != 1 {
		t.Fatalf("first call: %v, %v, warnings %q; want the result and a warning", res.Value, err, c.Facts.Warnings)
	}
	c = newCall()
	_, err = inv.Invoke(context.Background(), c)
	if ae, ok := axerr.As(err); !ok || ae.Code != axerr.CodeInternal || ae.Details["replayed"] != true || !c.Facts.Replayed {
		t.Fatalf("retry: %v; want the stored AXGATE_INTERNAL, replayed", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
}

// testOwner is the caller the store tests charge records to, with a quota
// they never reach.
var testOwner = IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 1000}

// TestIdempotencyUnkeyedCallsChargedToCaller: calls without an idempotency
// key leave duplicate markers; they are charged to the caller under a quota
// of their own, so one caller's distinct calls without a key cannot fill its
// tenant's share and refuse another caller's keyed call (nor use up the
// caller's own quota of keys).
func TestIdempotencyUnkeyedCallsChargedToCaller(t *testing.T) {
	const share, quota = 50, 10
	g, err := NewIdempotency(IdempotencyOptions{Store: NewMemoryIdempotencyStore(share), Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	inv := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}), nil, g.Stage())
	call := func(who, args, key string) error {
		c := middleware.NewCall("order_place", json.RawMessage(args), middleware.Principal{ID: who, Tenant: "acme"})
		c.Action = &manifest.Action{Intent: "order.place", Idempotent: new(false)}
		c.Credentials.IdempotencyKey = key
		_, err := inv.Invoke(t.Context(), c)
		return err
	}
	refused := 0
	for i := range share {
		err := call("alice", fmt.Sprintf(`{"n":%d}`, i), "")
		if err == nil {
			continue
		}
		e, ok := axerr.As(err)
		if !ok || e.Code != axerr.CodeRateLimited || fmt.Sprint(e.Details["reason"]) != fmt.Sprint(reasons.IdempotencyQuota) {
			t.Fatalf("alice's call %d without a key: %v, want ok or 429 idempotency_quota", i, err)
		}
		refused++
	}
	if refused != share-quota {
		t.Errorf("alice's calls without a key: %d refused, want %d (over the quota of %d)", refused, share-quota, quota)
	}
	if err := call("alice", `{"n":"keyed"}`, "k-1"); err != nil {
		t.Errorf("alice's keyed call after her calls without a key: %v", err)
	}
	if err := call("bob", `{"n":1}`, "k-1"); err != nil {
		t.Errorf("bob's keyed call after alice's calls without a key: %v", err)
	}
}
