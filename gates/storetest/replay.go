package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/token"
)

// TestReplayStore checks a token.ReplayStore. newStore returns a new, empty
// store for each subtest.
func TestReplayStore(t *testing.T, newStore func(t *testing.T) token.ReplayStore) {
	use := func(id string) token.Use {
		return token.Use{ID: id, Expires: time.Now().Add(5 * time.Minute)}
	}
	used := func(t *testing.T, s token.ReplayStore, id string) bool {
		t.Helper()
		ok, err := s.Used(ctx(t), id)
		if err != nil {
			t.Fatalf("Used(%q): %v", id, err)
		}
		return ok
	}

	t.Run("ConsumeMarksUsed", func(t *testing.T) {
		s := newStore(t)
		if used(t, s, "a") {
			t.Fatal("Used(a) = true before Consume")
		}
		if err := s.Consume(ctx(t), []token.Use{use("a")}); err != nil {
			t.Fatalf("Consume(a): %v", err)
		}
		if !used(t, s, "a") {
			t.Fatal("Used(a) = false after Consume")
		}
		if used(t, s, "b") {
			t.Fatal("Used(b) = true, but only a was consumed")
		}
	})

	t.Run("SecondConsumeIsReplay", func(t *testing.T) {
		s := newStore(t)
		if err := s.Consume(ctx(t), []token.Use{use("a")}); err != nil {
			t.Fatalf("first Consume: %v", err)
		}
		err := s.Consume(ctx(t), []token.Use{use("a")})
		if !errors.Is(err, token.ErrReplayed) {
			t.Fatalf("second Consume = %v, want token.ErrReplayed", err)
		}
	})

	t.Run("EmptyConsume", func(t *testing.T) {
		s := newStore(t)
		if err := s.Consume(ctx(t), nil); err != nil {
			t.Fatalf("Consume(nil) = %v, want nil", err)
		}
	})

	t.Run("SeveralIDs", func(t *testing.T) {
		s := newStore(t)
		if err := s.Consume(ctx(t), []token.Use{use("a"), use("b"), use("c")}); err != nil {
			t.Fatalf("Consume(a, b, c): %v", err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if !used(t, s, id) {
				t.Errorf("Used(%s) = false after Consume(a, b, c)", id)
			}
		}
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		s := newStore(t)
		if err := s.Consume(ctx(t), []token.Use{use("b")}); err != nil {
			t.Fatalf("Consume(b): %v", err)
		}
		err := s.Consume(ctx(t), []token.Use{use("a"), use("b"), use("c")})
		if !errors.Is(err, token.ErrReplayed) {
			t.Fatalf("Consume(a, b, c) with b used = %v, want token.ErrReplayed", err)
		}
		for _, id := range []string{"a", "c"} {
			if used(t, s, id) {
				t.Errorf("Used(%s) = true after a refused Consume: a refusal must record nothing", id)
			}
		}
		if err := s.Consume(ctx(t), []token.Use{use("a"), use("c")}); err != nil {
			t.Fatalf("Consume(a, c) after the refusal: %v", err)
		}
	})

	t.Run("SameIDTwiceInOneCallIsReplay", func(t *testing.T) {
		s := newStore(t)
		err := s.Consume(ctx(t), []token.Use{use("a"), use("b"), use("a")})
		if !errors.Is(err, token.ErrReplayed) {
			t.Fatalf("Consume(a, b, a) = %v, want token.ErrReplayed", err)
		}
		if used(t, s, "b") {
			t.Fatal("Used(b) = true after a refused Consume")
		}
	})

	t.Run("ConcurrentPresentationsOneWins", func(t *testing.T) {
		s := newStore(t)
		errs := race(Concurrency, func(int) error {
			return s.Consume(ctx(t), []token.Use{use("tok")})
		})
		ok, replayed, other := count(errs, token.ErrReplayed)
		if other != nil {
			t.Fatal(other)
		}
		if ok != 1 || replayed != Concurrency-1 {
			t.Fatalf("%d concurrent Consume of one id: %d succeeded, %d replayed; want exactly 1 success", Concurrency, ok, replayed)
		}
	})

	t.Run("ConcurrentOverlappingSetsOneWins", func(t *testing.T) {
		s := newStore(t)
		// Every set shares "shared", so at most one of them may succeed,
		// and the losers must not leave their own ids behind.
		errs := race(Concurrency, func(i int) error {
			return s.Consume(ctx(t), []token.Use{use(fmt.Sprint("own-", i)), use("shared")})
		})
		ok, replayed, other := count(errs, token.ErrReplayed)
		if other != nil {
			t.Fatal(other)
		}
		if ok != 1 || replayed != Concurrency-1 {
			t.Fatalf("%d concurrent overlapping Consume: %d succeeded, %d replayed; want exactly 1 success", Concurrency, ok, replayed)
		}
		for i, err := range errs {
			if err != nil && used(t, s, fmt.Sprint("own-", i)) {
				t.Fatalf("a refused Consume left its id own-%d recorded", i)
			}
		}
	})
}
