package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 21, 10, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// allowOne asks l about one counter.
func allowOne(ctx context.Context, l Limiter, key string, limit Limit, n int) (LimitDecision, error) {
	return l.AllowN(ctx, []LimitKey{{Key: key, Limit: limit}}, n)
}

func newTestLimiter(maxKeys int) (*MemoryLimiter, *fakeClock) {
	clk := newFakeClock()
	l := NewMemoryLimiter(maxKeys)
	l.now = clk.Now
	return l, clk
}

func TestMemoryLimiterExactUnderConcurrency(t *testing.T) {
	for _, maxKeys := range []int{0, 8} { // sharded and single-shard
		t.Run(fmt.Sprintf("maxKeys=%d", maxKeys), func(t *testing.T) {
			l, _ := newTestLimiter(maxKeys)
			limit := Limit{Count: 10, Per: time.Minute}
			var allowed, refused atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 100 {
						d, err := allowOne(context.Background(), l, "k", limit, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							allowed.Add(1)
						} else {
							refused.Add(1)
							if d.RetryAfter <= 0 {
								t.Errorf("refused with RetryAfter %v", d.RetryAfter)
							}
						}
					}
				}()
			}
			wg.Wait()
			if allowed.Load() != 10 || refused.Load() != 790 {
				t.Fatalf("allowed %d, refused %d of 800; want exactly 10 and 790", allowed.Load(), refused.Load())
			}
		})
	}
}

func TestMemoryLimiterRefillAndRetryAfter(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLimiter(0)
	limit := Limit{Count: 10, Per: time.Minute} // one call every 6s, bursts of 10

	for i := range 10 {
		d, err := allowOne(ctx, l, "k", limit, 1)
		if err != nil || !d.Allowed || d.Remaining != 9-i {
			t.Fatalf("call %d: %+v, %v; want allowed with %d remaining", i+1, d, err, 9-i)
		}
	}
	d, _ := allowOne(ctx, l, "k", limit, 1)
	if d.Allowed || d.RetryAfter != 6*time.Second || d.Remaining != 0 {
		t.Fatalf("11th call: %+v; want refused, retry after 6s", d)
	}
	// A refusal takes nothing: after 4s the wait is 2s.
	clk.Advance(4 * time.Second)
	if d, _ := allowOne(ctx, l, "k", limit, 1); d.Allowed || d.RetryAfter != 2*time.Second {
		t.Fatalf("after 4s: %+v; want refused, retry after 2s", d)
	}
	clk.Advance(2*time.Second + time.Millisecond)
	if d, _ := allowOne(ctx, l, "k", limit, 1); !d.Allowed {
		t.Fatalf("after 6s: %+v; want allowed", d)
	}
	if d, _ := allowOne(ctx, l, "k", limit, 1); d.Allowed {
		t.Fatalf("second call after 6s: %+v; want refused", d)
	}
}

func TestMemoryLimiterLookDoesNotCharge(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter(0)
	limit := Limit{Count: 1, Per: 30 * time.Second} // a cooldown

	for range 5 {
		if d, err := allowOne(ctx, l, "k", limit, 0); err != nil || !d.Allowed || d.Remaining != 1 {
			t.Fatalf("look: %+v, %v; want allowed, 1 remaining", d, err)
		}
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("looking at an unknown key stored %d keys", n)
	}
	if d, _ := allowOne(ctx, l, "k", limit, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("first call: %+v; want allowed", d)
	}
	for range 3 {
		if d, _ := allowOne(ctx, l, "k", limit, 0); d.Allowed || d.RetryAfter != 30*time.Second {
			t.Fatalf("look inside the cooldown: %+v; want refused, retry after 30s", d)
		}
	}
}

func TestMemoryLimiterForgetsIdleKeysAndStaysBounded(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLimiter(4)
	limit := Limit{Count: 2, Per: time.Minute}

	for i := range 4 {
		if d, err := allowOne(ctx, l, fmt.Sprint("busy", i), limit, 1); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v, %v", i, d, err)
		}
	}
	// Every key is still counting: a fifth is refused, not let through.
	if _, err := allowOne(ctx, l, "new", limit, 1); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("fifth key: err %v; want ErrStoreFull", err)
	}
	// Known keys still work when full.
	if d, err := allowOne(ctx, l, "busy0", limit, 1); err != nil || !d.Allowed {
		t.Fatalf("known key when full: %+v, %v", d, err)
	}
	// Once their buckets refill the keys are idle and forgotten.
	clk.Advance(time.Minute)
	if d, err := allowOne(ctx, l, "new", limit, 1); err != nil || !d.Allowed {
		t.Fatalf("new key after refill: %+v, %v", d, err)
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("Len = %d after the sweep; want 1", n)
	}
	// A forgotten key starts with a full bucket, as it would have had.
	for i := range 2 {
		if d, _ := allowOne(ctx, l, "busy0", limit, 1); !d.Allowed {
			t.Fatalf("forgotten key, call %d refused", i+1)
		}
	}
}

func TestMemoryLimiterSweepsPeriodically(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLimiter(0)
	limit := Limit{Count: 1, Per: time.Second}
	for i := range 1000 {
		if _, err := allowOne(ctx, l, fmt.Sprint("k", i), limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * limiterSweepEvery)
	for i := range 500 { // reaches every shard (a miss has odds below 1e-12)
		if _, err := allowOne(ctx, l, fmt.Sprint("fresh", i), limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.Len(); n != 500 {
		t.Fatalf("Len = %d; want the 500 fresh keys only", n)
	}
}

func TestMemoryLimiterChangedLimitKeepsCount(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter(0)
	five := Limit{Count: 5, Per: time.Minute}
	for range 4 {
		allowOne(ctx, l, "k", five, 1)
	}
	// Raised to 10 per minute: the one call left is still one call, not a
	// fresh bucket.
	ten := Limit{Count: 10, Per: time.Minute}
	if d, _ := allowOne(ctx, l, "k", ten, 1); !d.Allowed {
		t.Fatalf("first call after raising the limit: %+v; want allowed", d)
	}
	if d, _ := allowOne(ctx, l, "k", ten, 1); d.Allowed {
		t.Fatalf("second call after raising the limit: %+v; want refused", d)
	}
	// Lowered below what is left: what is left is cut to the new burst.
	allowOne(ctx, l, "j", five, 1) // 4 left
	two := Limit{Count: 2, Per: time.Minute}
	for i := range 2 {
		if d, _ := allowOne(ctx, l, "j", two, 1); !d.Allowed {
			t.Fatalf("call %d after lowering the limit: %+v; want allowed", i+1, d)
		}
	}
	if d, _ := allowOne(ctx, l, "j", two, 1); d.Allowed {
		t.Fatalf("third call after lowering the limit to 2: %+v; want refused", d)
	}
}

func TestMemoryLimiterRejectsBadInput(t *testing.T) {
	l, _ := newTestLimiter(0)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit Limit
		n     int
	}{
		{"zero count", Limit{Count: 0, Per: time.Minute}, 1},
		{"zero period", Limit{Count: 1, Per: 0}, 1},
		{"negative n", Limit{Count: 1, Per: time.Minute}, -1},
		{"n over burst", Limit{Count: 2, Per: time.Minute}, 3},
	} {
		if _, err := allowOne(ctx, l, "k", tc.limit, tc.n); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := allowOne(cancelled, l, "k", Limit{Count: 1, Per: time.Minute}, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err %v", err)
	}
}

func TestStateKeyIsUnambiguous(t *testing.T) {
	a := StateKey("rate", "a:b", "c")
	b := StateKey("rate", "a", "b:c")
	if a == b {
		t.Fatalf("%q == %q", a, b)
	}
	if got, want := StateKey("rate", "acme", "user-1", "order.place"), "rate:4:acme:6:user-1:11:order.place"; got != want {
		t.Fatalf("StateKey = %q; want %q", got, want)
	}
}

func ExampleMemoryLimiter() {
	l := NewMemoryLimiter(0)
	ctx := context.Background()
	limit := Limit{Count: 2, Per: time.Minute} // rate_limit: 2/minute
	for range 3 {
		d, _ := l.AllowN(ctx, []LimitKey{{Key: "user-1/order.place", Limit: limit}}, 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter.Round(time.Second))
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 30s
}

// TestRateLimitChargeIsAllOrNothing: a call whose rate limit is used up
// between the look and the charge (by concurrent calls) is refused at the
// commit, and its cooldown is not charged either: the caller is not locked
// out for the cooldown by a call that never ran.
func TestRateLimitChargeIsAllOrNothing(t *testing.T) {
	l, _ := newTestLimiter(0)
	who := middleware.Principal{ID: "alice", Tenant: "acme"}
	a := &manifest.Action{Intent: "sms.send", RateLimit: &manifest.RateLimit{Count: 3, Per: time.Hour}, Cooldown: 10 * time.Second}
	rateKey := StateKey("rate", who.Tenant, who.ID, a.Intent)
	cooldownKey := StateKey("cooldown", who.Tenant, who.ID, a.Intent)
	// Concurrent calls take the last units while this one waits at a later
	// gate.
	racer := middleware.Stage{Name: "racer", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if d, err := allowOne(ctx, l, rateKey, Limit{Count: 3, Per: time.Hour}, 3); err != nil || !d.Allowed {
			t.Fatalf("racer: %+v, %v", d, err)
		}
		return next.Invoke(ctx, call)
	}}
	var ran bool
	inv := middleware.Build(commitThenRun(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran = true
		return middleware.Result{}, nil
	}), nil, RateLimit(l), racer)
	call := middleware.NewCall("sms_send", nil, who)
	call.Action = a
	_, err := inv.Invoke(context.Background(), call)
	if ae, ok := axerr.As(err); !ok || ae.Code != axerr.CodeRateLimited || ae.Details["reason"] != "rate_limit" || ran {
		t.Fatalf("call that lost the last unit: %v, tool ran %v; want AXAG_RATE_LIMITED for the rate limit, tool not run", err, ran)
	}
	if d, err := allowOne(context.Background(), l, cooldownKey, Limit{Count: 1, Per: a.Cooldown}, 0); err != nil || !d.Allowed {
		t.Fatalf("cooldown after the refused call: %+v, %v; want it untouched", d, err)
	}
}

// A sweep due while a call charges a full counter it looked at and a new
// one must not drop the looked-at bucket from under the charge: the charge
// would be lost and the next call let through inside its cooldown.
func TestMemoryLimiterSweepDoesNotLoseACharge(t *testing.T) {
	l, clk := newTestLimiter(8) // one shard
	ctx := context.Background()
	cooldown := LimitKey{Key: "cool", Limit: Limit{Count: 1, Per: 3 * time.Second}}
	// Make the cooldown bucket exist, then let it refill past a sweep.
	if d, err := l.AllowN(ctx, []LimitKey{cooldown}, 1); err != nil || !d.Allowed {
		t.Fatalf("first = %+v, %v", d, err)
	}
	clk.Advance(2 * limiterSweepEvery)
	rate := LimitKey{Key: "rate-new", Limit: Limit{Count: 60, Per: time.Hour}}
	if d, err := l.AllowN(ctx, []LimitKey{cooldown, rate}, 1); err != nil || !d.Allowed {
		t.Fatalf("second = %+v, %v", d, err)
	}
	clk.Advance(100 * time.Millisecond)
	if d, err := l.AllowN(ctx, []LimitKey{cooldown, rate}, 1); err != nil || d.Allowed {
		t.Fatalf("third, 0.1 s into a 3 s cooldown = %+v, %v; want refused", d, err)
	}
}
