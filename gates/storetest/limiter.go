package storetest

import (
	"fmt"
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
		d, err := l.AllowN(ctx(t), []gates.LimitKey{{Key: key, Limit: limit}}, n)
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
			if d, err := l.AllowN(ctx(t), []gates.LimitKey{{Key: "k", Limit: tc.limit}}, tc.n); err == nil {
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
			d, err := l.AllowN(ctx(t), []gates.LimitKey{{Key: "k", Limit: limit}}, 1)
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

	// A call charged to several counters (a cooldown and a rate limit) is
	// taken from all of them at once, or from none.
	cooldown := gates.Limit{Count: 1, Per: 10 * time.Minute}
	both := []gates.LimitKey{{Key: "cooldown", Limit: cooldown}, {Key: "rate", Limit: threePerHour}}
	allowAll := func(t *testing.T, l gates.Limiter, keys []gates.LimitKey, n int) gates.LimitDecision {
		t.Helper()
		d, err := l.AllowN(ctx(t), keys, n)
		if err != nil {
			t.Fatalf("AllowN(%v, %d): %v", keys, n, err)
		}
		return d
	}

	t.Run("SeveralCountersTakeTogether", func(t *testing.T) {
		l := newLimiter(t)
		d := allowAll(t, l, both, 1)
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("first call on a cooldown and 3/hour = %+v, want allowed with 0 remaining (the cooldown's)", d)
		}
		if d := allow(t, l, "rate", threePerHour, 0); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("rate counter after the call = %+v, want 2 remaining", d)
		}
		refused(t, allow(t, l, "cooldown", cooldown, 0), cooldown.Per)
	})

	t.Run("SeveralCountersAllOrNothing", func(t *testing.T) {
		l := newLimiter(t)
		for range threePerHour.Count {
			allow(t, l, "rate", threePerHour, 1)
		}
		d := allowAll(t, l, both, 1)
		refused(t, d, time.Hour)
		if d.RefusedBy != 1 {
			t.Fatalf("RefusedBy = %d, want 1 (the rate limit; the cooldown would allow)", d.RefusedBy)
		}
		if d := allow(t, l, "cooldown", cooldown, 0); !d.Allowed {
			t.Fatalf("cooldown after a refused call = %+v: it was charged although the rate limit refused", d)
		}
	})

	t.Run("SeveralCountersRefusedByTheLongestWait", func(t *testing.T) {
		l := newLimiter(t)
		allow(t, l, "cooldown", cooldown, 1)
		for range threePerHour.Count {
			allow(t, l, "rate", threePerHour, 1)
		}
		for _, n := range []int{0, 1} {
			d := allowAll(t, l, both, n)
			refused(t, d, time.Hour)
			if d.RefusedBy != 1 || d.RetryAfter <= cooldown.Per {
				t.Fatalf("AllowN(%d) with both refusing = %+v, want the rate limit's wait (longer than the cooldown's %s)", n, d, cooldown.Per)
			}
		}
	})

	t.Run("SeveralCountersPeek", func(t *testing.T) {
		l := newLimiter(t)
		for range 3 {
			if d := allowAll(t, l, both, 0); !d.Allowed || d.Remaining != 1 {
				t.Fatalf("peek at fresh counters = %+v, want allowed with 1 remaining (the cooldown's)", d)
			}
		}
		if d := allowAll(t, l, both, 1); !d.Allowed {
			t.Fatalf("call after peeks refused (did a peek take calls?): %+v", d)
		}
		d := allowAll(t, l, both, 0)
		refused(t, d, cooldown.Per)
		if d.RefusedBy != 0 {
			t.Fatalf("peek inside the cooldown: RefusedBy = %d, want 0", d.RefusedBy)
		}
	})

	t.Run("SeveralCountersInvalidRequests", func(t *testing.T) {
		l := newLimiter(t)
		for name, keys := range map[string][]gates.LimitKey{
			"no counter":        nil,
			"one counter twice": {{Key: "k", Limit: threePerHour}, {Key: "k", Limit: threePerHour}},
			"n over one count":  {{Key: "a", Limit: threePerHour}, {Key: "b", Limit: gates.Limit{Count: 1, Per: time.Hour}}},
			"one invalid limit": {{Key: "a", Limit: threePerHour}, {Key: "b", Limit: gates.Limit{Count: 0, Per: time.Hour}}},
		} {
			if d, err := l.AllowN(ctx(t), keys, 2); err == nil {
				t.Errorf("%s: AllowN = %+v, want an error", name, d)
			}
		}
		if d := allow(t, l, "a", threePerHour, 0); d.Remaining != 3 {
			t.Fatalf("a refused request took calls: %+v", d)
		}
	})

	t.Run("ConcurrentCallsOnSeveralCountersHoldBoth", func(t *testing.T) {
		l := newLimiter(t)
		// Every call takes the shared counter and one of its own; the shared
		// one allows half of them.
		shared := gates.Limit{Count: Concurrency / 2, Per: time.Hour}
		allowed := make([]bool, Concurrency)
		errs := race(Concurrency, func(i int) error {
			d, err := l.AllowN(ctx(t), []gates.LimitKey{{Key: fmt.Sprint("own-", i), Limit: threePerHour}, {Key: "shared", Limit: shared}}, 1)
			allowed[i] = d.Allowed
			return err
		})
		if _, _, other := count(errs, nil); other != nil {
			t.Fatal(other)
		}
		n := 0
		for i, a := range allowed {
			if a {
				n++
				continue
			}
			if d := allow(t, l, fmt.Sprint("own-", i), threePerHour, 0); d.Remaining != threePerHour.Count {
				t.Fatalf("a refused call took from its own counter: %+v", d)
			}
		}
		if n != shared.Count {
			t.Fatalf("%d concurrent calls under %d per hour: %d allowed, want exactly %d", Concurrency, shared.Count, n, shared.Count)
		}
	})
}
