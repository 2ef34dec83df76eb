package gate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates/storetest"
	"github.com/axgate/axgate/token"
)

func TestMemoryReplayStoreContract(t *testing.T) {
	storetest.TestReplayStore(t, func(*testing.T) token.ReplayStore {
		return token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	})
}

// tkClock is a settable clock.
type tkClock struct{ now time.Time }

func (c *tkClock) Now() time.Time { return c.now }

func TestMemoryReplayStoreExpiryAndBound(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := token.NewMemoryReplayStore(token.MemoryReplayOptions{MaxEntries: 3, Now: clock.Now})
	ctx := t.Context()
	use := func(id string, ttl time.Duration) token.Use {
		return token.Use{ID: id, Expires: clock.now.Add(ttl)}
	}
	if err := s.Consume(ctx, []token.Use{use("a", time.Minute), use("b", time.Hour), use("c", time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Full of live ids: refuse rather than forget one.
	if err := s.Consume(ctx, []token.Use{use("d", time.Hour)}); !errors.Is(err, token.ErrReplayStoreFull) {
		t.Fatalf("Consume on a full store = %v, want ErrReplayStoreFull", err)
	}
	if used, _ := s.Used(ctx, "d"); used {
		t.Fatal("a refused Consume recorded its id")
	}
	// a expires: its place is freed, and it no longer counts as used.
	clock.now = clock.now.Add(2 * time.Minute)
	if used, _ := s.Used(ctx, "a"); used {
		t.Error("an expired id still reads as used")
	}
	if err := s.Consume(ctx, []token.Use{use("d", time.Hour)}); err != nil {
		t.Fatalf("Consume after an expiry freed room: %v", err)
	}
	if n := s.(interface{ Len() int }).Len(); n != 3 {
		t.Errorf("Len = %d, want 3 (a dropped, d added)", n)
	}
	// Replays stay refused until their own expiry.
	if err := s.Consume(ctx, []token.Use{use("b", time.Hour)}); !errors.Is(err, token.ErrReplayed) {
		t.Errorf("replay of b = %v, want ErrReplayed", err)
	}
	// One id twice in a batch is a replay and records nothing.
	clock.now = clock.now.Add(2 * time.Hour)
	if err := s.Consume(ctx, []token.Use{use("x", time.Hour), use("x", time.Hour)}); !errors.Is(err, token.ErrReplayed) {
		t.Errorf("Consume(x, x) = %v, want ErrReplayed", err)
	}
	if used, _ := s.Used(ctx, "x"); used {
		t.Error("a refused batch recorded x")
	}
}

func TestMemoryReplayStoreManyExpire(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := token.NewMemoryReplayStore(token.MemoryReplayOptions{MaxEntries: 1000, Now: clock.Now})
	for i := range 1000 {
		if err := s.Consume(t.Context(), []token.Use{{ID: fmt.Sprint(i), Expires: clock.now.Add(time.Duration(i+1) * time.Second)}}); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(500 * time.Second)
	for i := range 500 {
		if err := s.Consume(t.Context(), []token.Use{{ID: fmt.Sprint("n", i), Expires: clock.now.Add(time.Hour)}}); err != nil {
			t.Fatalf("Consume %d after half expired: %v", i, err)
		}
	}
	if err := s.Consume(t.Context(), []token.Use{{ID: "over", Expires: clock.now.Add(time.Hour)}}); !errors.Is(err, token.ErrReplayStoreFull) {
		t.Fatalf("Consume over the bound = %v, want ErrReplayStoreFull", err)
	}
}

// A token checked at its gate in time but committed after its expiry is
// still spent exactly once: two calls racing past the edge must not both run.
func TestMemoryReplayStoreExpiredAtCommit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: func() time.Time { return now }})
	use := []token.Use{{ID: "k", Expires: now.Add(-time.Second)}}
	if err := s.Consume(context.Background(), use); err != nil {
		t.Fatalf("first Consume = %v", err)
	}
	if err := s.Consume(context.Background(), use); !errors.Is(err, token.ErrReplayed) {
		t.Fatalf("second Consume = %v; want ErrReplayed", err)
	}
}
