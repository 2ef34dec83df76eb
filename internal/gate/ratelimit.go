package gate

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// RateLimit returns the rate-limit and cooldown gate, counting calls in l.
//
// An action's rate_limit (N/period) allows N calls per period with bursts up
// to N; its cooldown is the minimum interval between two calls. Both are
// counted per (principal, tenant, intent). A call over either is refused with
// AXAG_RATE_LIMITED (429) and retry_after; when both refuse, the refusal is
// the longer wait's, so that one retry_after is enough.
//
// The stage only looks at the counters (l.AllowN with n = 0), so a call over
// its limit is refused before anyone is asked to confirm it. The call is
// charged (n = 1) in the commit, right before the tool runs: a call that a
// later gate refuses (confirmation missing, approval pending, a duplicate)
// does not use up the caller's allowance, and a call that loses the race for
// the last unit is refused there. Its commit is registered before the token
// gates', so that such a call is refused before its tokens are spent. The
// cooldown and the rate limit are charged together, all or nothing: a call
// the rate limit refuses at the commit does not start a cooldown. One
// exception costs a unit: a call that passes this charge and is then refused
// by a later commit (its token spent meanwhile by a concurrent call, the
// replay store failing) has been charged. A check-only call (Enforcer.Check)
// is never charged. l must not be nil.
//
// Each call whose action declares a limit asks l twice, whatever the number
// of counters: one look, one charge (two Redis round trips with
// redisstore.NewLimiter).
func RateLimit(l Limiter) middleware.Stage {
	return middleware.Stage{Name: StageRateLimit, Applies: rateLimited, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		a := call.Action
		if a == nil || !rateLimited(a) {
			return next.Invoke(ctx, call)
		}
		rc := &rateCharge{l: l, action: a, cooldownAt: -1}
		if a.Cooldown > 0 {
			rc.cooldownAt = rc.n
			rc.keys[rc.n] = LimitKey{Key: StateKey("cooldown", call.Principal.Tenant, call.Principal.ID, a.Intent), Limit: Limit{Count: 1, Per: a.Cooldown}, Tenant: call.Principal.Tenant}
			rc.n++
		}
		if a.RateLimit != nil {
			rc.keys[rc.n] = LimitKey{Key: StateKey("rate", call.Principal.Tenant, call.Principal.ID, a.Intent), Limit: Limit{Count: a.RateLimit.Count, Per: a.RateLimit.Per}, Tenant: call.Principal.Tenant}
			rc.n++
		}
		if err := rc.take(ctx, 0); err != nil {
			return middleware.Result{}, err
		}
		if !call.CheckOnly() {
			call.OnCommit(rc.charge)
			// A later gate whose refusal is itself a side effect (the
			// approval gate opening a request) charges the call there.
			rc.call = call
			ctx = context.WithValue(ctx, rateChargeKey{}, rc)
		}
		return next.Invoke(ctx, call)
	}}
}

// rateChargeKey is the context key of the call's pending rateCharge.
type rateChargeKey struct{}

// pendingRateCharge returns the rate charge the rate stage left for call in
// ctx, or nil (no limit declared, the stage left out, another call).
func pendingRateCharge(ctx context.Context, call *middleware.Call) *rateCharge {
	rc, _ := ctx.Value(rateChargeKey{}).(*rateCharge)
	if rc == nil || rc.call != call {
		return nil
	}
	return rc
}

// rateLimited reports whether a declares a rate limit or a cooldown (true
// for a nil action, which the gate passes on to the next one).
func rateLimited(a *manifest.Action) bool {
	return a == nil || a.RateLimit != nil || a.Cooldown > 0
}

// rateCharge is one call's counters: its cooldown and its rate limit, as
// far as the action declares them.
type rateCharge struct {
	call   *middleware.Call
	l      Limiter
	action *manifest.Action
	keys   [2]LimitKey
	n      int
	// cooldownAt is the index of the cooldown in keys, -1 without one.
	cooldownAt int
}

// charge takes the call from every counter at once: the commit.
func (rc *rateCharge) charge(ctx context.Context) error {
	if err := rc.take(ctx, 1); err != nil {
		return err
	}
	return nil
}

// take asks the limiter for n calls from all the counters at once: nil, or
// the refusal of the counter with the longer wait.
func (rc *rateCharge) take(ctx context.Context, n int) *axerr.Error {
	d, err := rc.l.AllowN(ctx, rc.keys[:rc.n], n)
	var e *axerr.Error
	switch {
	case err != nil:
		e = StoreUnavailable(rc.action.Intent, "the rate limiter", err)
	case d.Allowed:
		return nil
	default:
		by := d.RefusedBy
		if by < 0 || by >= rc.n {
			// A limiter that names no counter: blame the rate limit, the
			// one with a period to quote, or the cooldown when alone.
			by = rc.n - 1
		}
		e = RateLimited(rc.action, by == rc.cooldownAt, d.RetryAfter)
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
			WithReason(reasons.Cooldown).
			With("cooldown_seconds", seconds(a.Cooldown))
	} else {
		e = axerr.Newf(axerr.CodeRateLimited, "%s may be called at most %d times per %s", a.Intent, a.RateLimit.Count, periodName(a.RateLimit.Per)).
			WithReason(reasons.RateLimit).
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

// DefaultMaxKeys bounds the keys a memory store holds per tenant when its
// constructor is given no bound.
const DefaultMaxKeys = 100_000

// ErrStoreFull is returned by a memory store that holds as many live keys as
// it may: the gate then refuses the call (503) rather than forget a count
// and let a caller past its limit.
var ErrStoreFull = errors.New("gates: memory store is full")

// limiterSweepEvery is how often a shard of the memory limiter forgets its
// idle keys, at the latest.
const limiterSweepEvery = time.Minute

// sweepFullEvery is how often a full memory store looks for keys to forget,
// at most: a flood of new keys against a full store must not turn every
// call into a sweep under the lock.
const sweepFullEvery = time.Second

// sweepDue reports whether a memory store that last forgot its idle keys at
// last should look for more now: every period, or sooner (but not more than
// once per sweepFullEvery) when it is full.
func sweepDue(now, last time.Time, period time.Duration, full bool) bool {
	since := now.Sub(last)
	return since >= period || (full && since >= sweepFullEvery)
}

// MemoryLimiter is a Limiter for one process: a token bucket per key.
//
// The buckets are golang.org/x/time/rate's, Limit{Count, Per} being a bucket
// of Count tokens refilled at Count per Per. A key whose bucket has refilled
// is indistinguishable from a new one, so it is forgotten (idle keys are
// swept as new keys arrive): memory holds only keys used within their period,
// up to a bound per tenant (LimitKey.Tenant): one tenant whose callers fill
// its share never refuses another tenant's calls. It is safe for concurrent
// use.
type MemoryLimiter struct {
	seed        maphash.Seed
	shards      []limiterShard
	maxPerShard int
	now         func() time.Time
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	// tenants counts the buckets of each tenant in this shard.
	tenants   map[string]int
	lastSweep time.Time
}

type bucket struct {
	lim    *rate.Limiter
	limit  Limit
	tenant string
}

// NewMemoryLimiter returns a MemoryLimiter that holds at most maxKeys busy keys per tenant.
//
// DefaultMaxKeys is used when maxKeys ≤ 0. When every one of a tenant's is
// still counting, a new key of that tenant gets ErrStoreFull: the call is
// refused, never let through uncounted; other tenants are unaffected.
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
		l.shards[i].tenants = make(map[string]int)
	}
	return l
}

// AllowN takes n calls from every counter in keys, all or nothing (see Limiter); n = 0 only looks.
//
// The shards of the keys stay locked from the first look to the last charge,
// so the decision is atomic. When refused, nothing is taken and RetryAfter
// says when the counter that refused longest will allow one call (for n = 0)
// or the n calls (for n > 0).
func (l *MemoryLimiter) AllowN(ctx context.Context, keys []LimitKey, n int) (LimitDecision, error) {
	if err := checkLimitKeys(keys, n); err != nil {
		return LimitDecision{}, err
	}
	if err := ctx.Err(); err != nil {
		return LimitDecision{}, err
	}
	now := l.now()

	// Lock each shard the keys fall in once, in shard order (no deadlock
	// between calls that share shards).
	var shardBuf [4]int
	shardOf := shardBuf[:0]
	if len(keys) > len(shardBuf) {
		shardOf = make([]int, 0, len(keys))
	}
	for _, k := range keys {
		shardOf = append(shardOf, l.shardIndex(k.Key))
	}
	var lockBuf [4]int
	locked := append(lockBuf[:0], shardOf...)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		l.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			l.shards[i].mu.Unlock()
		}
	}()

	// Sweep before looking, never between looking and charging: a sweep
	// drops full buckets, and one this call looked at would then be
	// charged outside the map, its charge lost. A swept bucket is full, the
	// same as an absent one, so the look below sees no difference.
	if n > 0 {
		for _, i := range locked {
			s := &l.shards[i]
			full := false
			for j, k := range keys {
				full = full || (shardOf[j] == i && s.tenants[k.Tenant] >= l.maxPerShard)
			}
			if sweepDue(now, s.lastSweep, limiterSweepEvery, full) {
				s.sweep(now)
			}
		}
	}

	// Look at every counter first; charge only when all of them allow.
	want := max(n, 1)
	d := LimitDecision{Allowed: true, Remaining: math.MaxInt}
	var bucketBuf [4]*bucket
	buckets := bucketBuf[:0]
	if len(keys) > len(bucketBuf) {
		buckets = make([]*bucket, 0, len(keys))
	}
	for i, k := range keys {
		b := l.shards[shardOf[i]].buckets[k.Key]
		buckets = append(buckets, b)
		if b == nil {
			// A key never seen (or forgotten once full) has a full bucket.
			d.Remaining = min(d.Remaining, k.Limit.Count-n)
			continue
		}
		if b.limit != k.Limit {
			// The manifest changed the limit: keep the count, change the
			// rate.
			b.lim.SetLimitAt(now, every(k.Limit))
			b.lim.SetBurstAt(now, k.Limit.Count)
			b.limit = k.Limit
		}
		if tokens := b.lim.TokensAt(now); tokens >= float64(want) {
			d.Remaining = min(d.Remaining, int(tokens)-n)
			continue
		}
		// Refused: ask the bucket when the call would be allowed, then give
		// the reservation back (exact under the lock: nothing was reserved
		// after it).
		r := b.lim.ReserveN(now, want)
		delay := r.DelayFrom(now)
		r.CancelAt(now)
		if d.Allowed || delay > d.RetryAfter {
			d = LimitDecision{RetryAfter: delay, RefusedBy: i}
		}
	}
	if !d.Allowed {
		if d.RetryAfter <= 0 {
			// Cannot happen: a refusal always has a wait. Refuse rather
			// than assume, and say when to come back.
			d.RetryAfter = keys[d.RefusedBy].Limit.Per / time.Duration(keys[d.RefusedBy].Limit.Count)
		}
		return d, nil
	}
	if n == 0 {
		return d, nil
	}
	// Make the buckets of new keys before charging any, so that a full
	// store refuses the call without charging part of it.
	for i, k := range keys {
		if buckets[i] != nil {
			continue
		}
		s := &l.shards[shardOf[i]]
		if s.tenants[k.Tenant] >= l.maxPerShard {
			return LimitDecision{}, ErrStoreFull
		}
		buckets[i] = &bucket{lim: rate.NewLimiter(every(k.Limit), k.Limit.Count), limit: k.Limit, tenant: k.Tenant}
		s.buckets[k.Key] = buckets[i]
		s.tenants[k.Tenant]++
	}
	for _, b := range buckets {
		// Cannot fail: every bucket was seen to hold n tokens under the
		// lock.
		b.lim.AllowN(now, n)
	}
	return d, nil
}

// checkLimitKeys refuses a request no limiter can answer: no counter, a
// counter asked twice, a limit that is not a rate, or n out of range.
func checkLimitKeys(keys []LimitKey, n int) error {
	if len(keys) == 0 {
		return errors.New("no counter to take from")
	}
	for i, k := range keys {
		if k.Limit.Count < 1 || k.Limit.Per <= 0 {
			return fmt.Errorf("invalid limit %d per %s", k.Limit.Count, k.Limit.Per)
		}
		if n < 0 || n > k.Limit.Count {
			return fmt.Errorf("cannot take %d calls under a limit of %d", n, k.Limit.Count)
		}
		for _, other := range keys[:i] {
			if other.Key == k.Key {
				return fmt.Errorf("counter %q asked twice in one call", k.Key)
			}
		}
	}
	return nil
}

func (l *MemoryLimiter) shardIndex(key string) int {
	if len(l.shards) == 1 {
		return 0
	}
	return int(maphash.String(l.seed, key) % uint64(len(l.shards)))
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
			s.drop(k, b)
		}
	}
	s.lastSweep = now
}

// drop forgets the bucket b of key and uncounts it from its tenant.
func (s *limiterShard) drop(key string, b *bucket) {
	delete(s.buckets, key)
	if n := s.tenants[b.tenant] - 1; n > 0 {
		s.tenants[b.tenant] = n
	} else {
		delete(s.tenants, b.tenant)
	}
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
