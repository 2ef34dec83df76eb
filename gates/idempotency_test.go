package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

	rec, claimed, err := s.Begin(ctx, "k", "digest-1", time.Minute)
	if err != nil || !claimed || rec != nil {
		t.Fatalf("first Begin: %v, %v, %v; want claimed", rec, claimed, err)
	}
	rec, claimed, err = s.Begin(ctx, "k", "digest-2", time.Minute)
	if err != nil || claimed || rec == nil || rec.State != IdempotencyInFlight || rec.ArgsSHA256 != "digest-1" {
		t.Fatalf("Begin while in flight: %+v, %v, %v; want the in-flight record of digest-1", rec, claimed, err)
	}
	if err := s.Complete(ctx, "k", json.RawMessage(`{"order_id":"o-1"}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	// Completing renews the record for the window, past the lease.
	clk.Advance(30 * time.Minute)
	rec, claimed, _ = s.Begin(ctx, "k", "digest-1", time.Minute)
	if claimed || rec.State != IdempotencyDone || string(rec.Result) != `{"order_id":"o-1"}` {
		t.Fatalf("Begin after Complete: %+v, %v; want the done record", rec, claimed)
	}
	// The copy is the caller's: changing it does not change the store.
	rec.Result[0] = 'X'
	if rec, _, _ = s.Begin(ctx, "k", "digest-1", time.Minute); string(rec.Result) != `{"order_id":"o-1"}` {
		t.Fatalf("stored result changed through a returned copy: %s", rec.Result)
	}
	clk.Advance(31 * time.Minute)
	if _, claimed, _ = s.Begin(ctx, "k", "digest-3", time.Minute); !claimed {
		t.Fatal("Begin after the window: not claimed")
	}
	if err := s.Release(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, claimed, _ = s.Begin(ctx, "k", "digest-4", time.Minute); !claimed {
		t.Fatal("Begin after Release: not claimed")
	}
	if err := s.Release(ctx, "never-held"); err != nil {
		t.Fatalf("Release of a key not held: %v", err)
	}
}

func TestMemoryIdempotencyStoreLeaseExpires(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestIdempotencyStore(0)
	s.Begin(ctx, "k", "d", time.Minute)
	clk.Advance(time.Minute)
	if err := s.Complete(ctx, "k", json.RawMessage(`1`), time.Hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Complete after the lease: %v; want ErrNotFound", err)
	}
	if _, claimed, _ := s.Begin(ctx, "k", "d", time.Minute); !claimed {
		t.Fatal("Begin after the lease: not claimed")
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
				_, claimed, err := s.Begin(context.Background(), "k", "d", time.Minute)
				if err != nil {
					t.Error(err)
				}
				if claimed {
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
		if _, claimed, err := s.Begin(ctx, fmt.Sprint("k", i), "d", time.Minute); err != nil || !claimed {
			t.Fatalf("key %d: %v, %v", i, claimed, err)
		}
	}
	if _, _, err := s.Begin(ctx, "k3", "d", time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("fourth live key: %v; want ErrStoreFull", err)
	}
	clk.Advance(time.Minute)
	if _, claimed, err := s.Begin(ctx, "k3", "d", time.Minute); err != nil || !claimed {
		t.Fatalf("after expiry: %v, %v; want claimed", claimed, err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d; want the expired records swept", n)
	}
}

func TestMemoryIdempotencyStoreRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestIdempotencyStore(0)
	if _, _, err := s.Begin(ctx, "k", "d", 0); err == nil {
		t.Error("Begin with ttl 0: no error")
	}
	if err := s.Complete(ctx, "k", nil, -time.Second); err == nil {
		t.Error("Complete with negative ttl: no error")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Begin(cancelled, "k", "d", time.Minute); !errors.Is(err, context.Canceled) {
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
