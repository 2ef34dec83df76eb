package gates

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// StageRateLimit is the name of the rate-limit and cooldown stage.
const StageRateLimit = "rate_limit"

// RateLimit returns the rate-limit and cooldown gate, counting calls in l.
//
// An action's rate_limit (N/period) allows N calls per period with bursts up
// to N; its cooldown is the minimum interval between two calls. Both are
// counted per (principal, tenant, intent). A call over either is refused with
// AXAG_RATE_LIMITED (429) and retry_after.
//
// The stage only looks at the counters (l.AllowN with n = 0), so a call over
// its limit is refused before anyone is asked to confirm it. The call is
// charged (n = 1) in the commit, right before the tool runs, together with
// the token ids: a call that a later gate refuses (confirmation missing,
// approval pending, a duplicate) does not use up the caller's allowance, and
// a call that loses the race for the last unit is refused there. A
// check-only call (Enforcer.Check) is never charged. l must not be nil.
func RateLimit(l Limiter) middleware.Stage {
	return middleware.Stage{Name: StageRateLimit, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		a := call.Action
		if a == nil || (a.RateLimit == nil && a.Cooldown <= 0) {
			return next.Invoke(ctx, call)
		}
		rc := rateCharge{l: l, action: a}
		if a.Cooldown > 0 {
			rc.cooldownKey = StateKey("cooldown", call.Principal.Tenant, call.Principal.ID, a.Intent)
		}
		if a.RateLimit != nil {
			rc.rateKey = StateKey("rate", call.Principal.Tenant, call.Principal.ID, a.Intent)
		}
		if err := rc.take(ctx, 0); err != nil {
			return middleware.Result{}, err
		}
		if !call.CheckOnly() {
			call.OnCommit(func(ctx context.Context) error { return rc.take(ctx, 1) })
		}
		return next.Invoke(ctx, call)
	}}
}

// rateCharge is one call's counters: its cooldown and its rate limit.
type rateCharge struct {
	l      Limiter
	action *manifest.Action
	// The keys name (principal, tenant, intent), one per counter; "" when
	// the action does not declare that limit.
	cooldownKey, rateKey string
}

// take asks the limiter for n calls under the cooldown, then the rate limit.
// When charging (n > 0) it stops at the first refusal, so that a call the
// cooldown refuses leaves the rate limit uncharged. When looking (n = 0) it
// asks both and reports the longer wait, so that one retry_after is enough.
func (rc rateCharge) take(ctx context.Context, n int) error {
	var refusal *axerr.Error
	for _, c := range [2]struct {
		key      string
		cooldown bool
	}{{rc.cooldownKey, true}, {rc.rateKey, false}} {
		if c.key == "" {
			continue
		}
		e := rc.ask(ctx, c.key, n, c.cooldown)
		if e == nil {
			continue
		}
		if n > 0 || e.Code != axerr.CodeRateLimited {
			return e
		}
		if refusal == nil || e.RetryAfter > refusal.RetryAfter {
			refusal = e
		}
	}
	if refusal == nil {
		return nil
	}
	return refusal
}

// ask takes n calls from one counter: nil, or the refusal.
func (rc rateCharge) ask(ctx context.Context, key string, n int, cooldown bool) *axerr.Error {
	lim := Limit{Count: 1, Per: rc.action.Cooldown}
	if !cooldown {
		lim = Limit{Count: rc.action.RateLimit.Count, Per: rc.action.RateLimit.Per}
	}
	d, err := rc.l.AllowN(ctx, key, lim, n)
	var e *axerr.Error
	switch {
	case err != nil:
		e = StoreUnavailable(rc.action.Intent, "the rate limiter", err)
	case d.Allowed:
		return nil
	default:
		e = RateLimited(rc.action, cooldown, d.RetryAfter)
	}
	// Name this gate even when the refusal comes from the commit stage.
	e.Gate = StageRateLimit
	return e
}

// RateLimited is the refusal of a call over its rate limit (cooldown false)
// or inside its cooldown (cooldown true): 429 with retry_after, the reason
// ("rate_limit" or "cooldown") and the declared limit in the details.
func RateLimited(a *manifest.Action, cooldown bool, retryAfter time.Duration) *axerr.Error {
	if retryAfter <= 0 {
		// The limiter refused without saying for how long: say one second
		// rather than invite an immediate retry.
		retryAfter = time.Second
	}
	var e *axerr.Error
	if cooldown {
		e = axerr.Newf(axerr.CodeRateLimited, "%s may be called at most once every %s", a.Intent, a.Cooldown).
			With("reason", "cooldown").
			With("cooldown_seconds", seconds(a.Cooldown))
	} else {
		e = axerr.Newf(axerr.CodeRateLimited, "%s may be called at most %d times per %s", a.Intent, a.RateLimit.Count, periodName(a.RateLimit.Per)).
			With("reason", "rate_limit").
			With("rate_limit", rateSpec(a.RateLimit))
	}
	e.RetryAfter = retryAfter
	e.Intent = a.Intent
	e.Suggestion = fmt.Sprintf("Wait %d seconds, then call again.", e.RetryAfterSeconds())
	return e
}

// seconds renders d in whole seconds, rounded up, as the envelope renders
// retry_after.
func seconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

func periodName(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

func rateSpec(r *manifest.RateLimit) string {
	return strconv.Itoa(r.Count) + "/" + periodName(r.Per)
}

// StateKey builds a store key from a kind and parts. Each part is written
// with its length in front, so no part can be forged to look like two
// ("a:b" + "c" never equals "a" + "b:c"); stores may add their own prefix.
func StateKey(kind string, parts ...string) string {
	n := len(kind)
	for _, p := range parts {
		n += len(p) + 2 + digits(len(p))
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(kind)
	var num [20]byte
	for _, p := range parts {
		b.WriteByte(':')
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// DefaultMaxKeys bounds the keys a memory store holds when its constructor is
// given no bound.
const DefaultMaxKeys = 100_000

// ErrStoreFull is returned by a memory store that holds as many live keys as
// it may: the gate then refuses the call (503) rather than forget a count
// and let a caller past its limit.
var ErrStoreFull = errors.New("memory store is full")

// limiterSweepEvery is how often a shard of the memory limiter forgets its
// idle keys, at the latest.
const limiterSweepEvery = time.Minute

// sweepFullEvery is how often a full memory store looks for keys to forget,
// at most: a flood of new keys against a full store must not turn every
// call into a sweep under the lock.
const sweepFullEvery = time.Second

// MemoryLimiter is a Limiter for one process: a token bucket per key
// (golang.org/x/time/rate), Limit{Count, Per} being a bucket of Count tokens
// refilled at Count per Per. A key whose bucket has refilled is
// indistinguishable from a new one, so it is forgotten (idle keys are swept
// as new keys arrive): memory holds only keys used within their period, up to
// a bound. It is safe for concurrent use.
type MemoryLimiter struct {
	seed        maphash.Seed
	shards      []limiterShard
	maxPerShard int
	now         func() time.Time
}

type limiterShard struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim   *rate.Limiter
	limit Limit
}

// NewMemoryLimiter returns a MemoryLimiter that holds at most maxKeys busy
// keys (DefaultMaxKeys when maxKeys ≤ 0). When every one of them is still
// counting, a new key gets ErrStoreFull: the call is refused, never let
// through uncounted.
func NewMemoryLimiter(maxKeys int) *MemoryLimiter {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	// Shards spread the lock; a small bound keeps one shard so that the
	// bound is exact.
	n := 1
	if maxKeys >= 16*1024 {
		n = 16
	}
	l := &MemoryLimiter{seed: maphash.MakeSeed(), shards: make([]limiterShard, n), maxPerShard: (maxKeys + n - 1) / n, now: time.Now}
	for i := range l.shards {
		l.shards[i].buckets = make(map[string]*bucket)
	}
	return l
}

// AllowN takes n calls for key under limit; n = 0 only looks. When refused,
// nothing is taken and RetryAfter says when one call will be allowed (for
// n = 0) or the n calls (for n > 0).
func (l *MemoryLimiter) AllowN(ctx context.Context, key string, limit Limit, n int) (LimitDecision, error) {
	if limit.Count < 1 || limit.Per <= 0 {
		return LimitDecision{}, fmt.Errorf("invalid limit %d per %s", limit.Count, limit.Per)
	}
	if n < 0 || n > limit.Count {
		return LimitDecision{}, fmt.Errorf("cannot take %d calls under a limit of %d", n, limit.Count)
	}
	if err := ctx.Err(); err != nil {
		return LimitDecision{}, err
	}
	now := l.now()
	s := &l.shards[0]
	if len(l.shards) > 1 {
		s = &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	b := s.buckets[key]
	if b == nil {
		if n == 0 {
			// A key never seen (or forgotten once full) has a full bucket.
			return LimitDecision{Allowed: true, Remaining: limit.Count}, nil
		}
		if since := now.Sub(s.lastSweep); since >= limiterSweepEvery || (len(s.buckets) >= l.maxPerShard && since >= sweepFullEvery) {
			s.sweep(now)
		}
		if len(s.buckets) >= l.maxPerShard {
			return LimitDecision{}, ErrStoreFull
		}
		b = &bucket{lim: rate.NewLimiter(every(limit), limit.Count), limit: limit}
		s.buckets[key] = b
	} else if b.limit != limit {
		// The manifest changed the limit: keep the count, change the rate.
		b.lim.SetLimitAt(now, every(limit))
		b.lim.SetBurstAt(now, limit.Count)
		b.limit = limit
	}

	want := max(n, 1)
	if b.lim.TokensAt(now) >= float64(want) {
		if n > 0 && !b.lim.AllowN(now, n) {
			// Cannot happen under the shard's lock; refuse rather than assume.
			return LimitDecision{RetryAfter: limit.Per / time.Duration(limit.Count)}, nil
		}
		return LimitDecision{Allowed: true, Remaining: remaining(b.lim, now)}, nil
	}
	// Refused: ask the bucket when the call would be allowed, then give the
	// reservation back (exact under the shard's lock: nothing was reserved
	// after it).
	r := b.lim.ReserveN(now, want)
	delay := r.DelayFrom(now)
	r.CancelAt(now)
	return LimitDecision{RetryAfter: delay, Remaining: 0}, nil
}

// Len returns how many keys the limiter holds now (idle keys not yet swept
// included).
func (l *MemoryLimiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// sweep forgets the keys whose bucket has refilled.
func (s *limiterShard) sweep(now time.Time) {
	for k, b := range s.buckets {
		if b.lim.TokensAt(now) >= float64(b.limit.Count) {
			delete(s.buckets, k)
		}
	}
	s.lastSweep = now
}

// every is the bucket's refill rate: Count tokens per Per.
func every(l Limit) rate.Limit { return rate.Limit(float64(l.Count) / l.Per.Seconds()) }

func remaining(lim *rate.Limiter, now time.Time) int {
	t := lim.TokensAt(now)
	if t < 0 {
		return 0
	}
	return int(t)
}
