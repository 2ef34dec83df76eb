package storetest

import (
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
)

// TestLimiter checks a gates.Limiter. newLimiter returns a new limiter with
// no history for each subtest. The limits are long (per hour) so that nothing
// refills while a subtest runs, except in the subtest about refilling.
func TestLimiter(t *testing.T, newLimiter func(t *testing.T) gates.Limiter) {
	threePerHour := gates.Limit{Count: 3, Per: time.Hour}
	allow := func(t *testing.T, l gates.Limiter, key string, limit gates.Limit, n int) gates.LimitDecision {
		t.Helper()
		d, err := l.AllowN(ctx(t), key, limit, n)
		if err != nil {
			t.Fatalf("AllowN(%q, %v, %d): %v", key, limit, n, err)
		}
		return d
	}
	refused := func(t *testing.T, d gates.LimitDecision, per time.Duration) {
		t.Helper()
		if d.Allowed {
			t.Fatalf("allowed past the limit: %+v", d)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > per {
			t.Fatalf("RetryAfter = %s, want within (0, %s]", d.RetryAfter, per)
		}
	}

	t.Run("TakesUpToCount", func(t *testing.T) {
		l := newLimiter(t)
		for i := range threePerHour.Count {
			d := allow(t, l, "k", threePerHour, 1)
			if !d.Allowed {
				t.Fatalf("call %d of %d refused: %+v", i+1, threePerHour.Count, d)
			}
			if want := threePerHour.Count - i - 1; d.Remaining != want {
				t.Errorf("call %d: Remaining = %d, want %d", i+1, d.Remaining, want)
			}
		}
		refused(t, allow(t, l, "k", threePerHour, 1), time.Hour)
	})

	t.Run("PeekTakesNothing", func(t *testing.T) {
		l := newLimiter(t)
		for range 5 {
			if d := allow(t, l, "k", threePerHour, 0); !d.Allowed {
				t.Fatalf("peek on a fresh key refused: %+v", d)
			}
		}
		for i := range threePerHour.Count {
			if d := allow(t, l, "k", threePerHour, 1); !d.Allowed {
				t.Fatalf("call %d after peeks refused (did a peek take a call?): %+v", i+1, d)
			}
		}
		refused(t, allow(t, l, "k", threePerHour, 0), time.Hour)
		refused(t, allow(t, l, "k", threePerHour, 1), time.Hour)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		l := newLimiter(t)
		for range threePerHour.Count {
			allow(t, l, "a", threePerHour, 1)
		}
		refused(t, allow(t, l, "a", threePerHour, 1), time.Hour)
		if d := allow(t, l, "b", threePerHour, 1); !d.Allowed {
			t.Fatalf("key b refused because key a is exhausted: %+v", d)
		}
	})

	t.Run("TakesSeveral", func(t *testing.T) {
		l := newLimiter(t)
		if d := allow(t, l, "k", threePerHour, 2); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("AllowN(2) of 3 = %+v, want allowed with 1 remaining", d)
		}
		refused(t, allow(t, l, "k", threePerHour, 2), time.Hour)
		if d := allow(t, l, "k", threePerHour, 1); !d.Allowed {
			t.Fatalf("AllowN(1) with one left refused (did the refused AllowN(2) take calls?): %+v", d)
		}
	})

	t.Run("InvalidRequestsAreErrors", func(t *testing.T) {
		l := newLimiter(t)
		for _, tc := range []struct {
			limit gates.Limit
			n     int
		}{
			{gates.Limit{Count: 0, Per: time.Hour}, 1},
			{gates.Limit{Count: -1, Per: time.Hour}, 1},
			{gates.Limit{Count: 3, Per: 0}, 1},
			{threePerHour, -1},
			{threePerHour, 4}, // more than could ever be allowed at once
		} {
			if d, err := l.AllowN(ctx(t), "k", tc.limit, tc.n); err == nil {
				t.Errorf("AllowN(%+v, %d) = %+v, want an error", tc.limit, tc.n, d)
			}
		}
	})

	t.Run("Cooldown", func(t *testing.T) {
		l := newLimiter(t)
		cooldown := gates.Limit{Count: 1, Per: 10 * time.Minute}
		if d := allow(t, l, "k", cooldown, 1); !d.Allowed {
			t.Fatalf("first call under a cooldown refused: %+v", d)
		}
		refused(t, allow(t, l, "k", cooldown, 1), 10*time.Minute)
	})

	t.Run("RefillsOverTime", func(t *testing.T) {
		l := newLimiter(t)
		fast := gates.Limit{Count: 2, Per: 200 * time.Millisecond}
		allow(t, l, "k", fast, 1)
		allow(t, l, "k", fast, 1)
		eventually(t, "a call allowed again after the period", func() bool {
			return allow(t, l, "k", fast, 1).Allowed
		})
	})

	t.Run("ConcurrentCallsHoldTheLimit", func(t *testing.T) {
		l := newLimiter(t)
		limit := gates.Limit{Count: Concurrency / 2, Per: time.Hour}
		allowed := make([]bool, Concurrency)
		errs := race(Concurrency, func(i int) error {
			d, err := l.AllowN(ctx(t), "k", limit, 1)
			allowed[i] = d.Allowed
			return err
		})
		if _, _, other := count(errs, nil); other != nil {
			t.Fatal(other)
		}
		n := 0
		for _, a := range allowed {
			if a {
				n++
			}
		}
		if n != limit.Count {
			t.Fatalf("%d concurrent calls under %d per hour: %d allowed, want exactly %d", Concurrency, limit.Count, n, limit.Count)
		}
	})
}
