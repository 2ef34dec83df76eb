package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
)

// Limiter is a gates.Limiter on Redis, using the GCRA of
// github.com/go-redis/redis_rate: the state of a key is one timestamp, and a
// decision is one script run (one round trip).
type Limiter struct {
	base
	rl *redis_rate.Limiter
}

var _ gates.Limiter = (*Limiter)(nil)

// NewLimiter returns a Limiter on client.
func NewLimiter(client redis.UniversalClient, opts Options) *Limiter {
	l := &Limiter{base: newBase(client, opts)}
	l.rl = redis_rate.NewLimiter(rateKeys{client})
	return l
}

// AllowN takes n calls for key under limit: Count calls per Per, in bursts
// of up to Count. With n = 0 it only looks: Allowed says whether one call
// would be allowed now, and nothing is taken. n may not exceed Count: so many
// calls could never be allowed at once.
func (l *Limiter) AllowN(ctx context.Context, key string, limit gates.Limit, n int) (gates.LimitDecision, error) {
	if limit.Count <= 0 || limit.Per <= 0 {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: invalid limit %d per %s", limit.Count, limit.Per)
	}
	if n < 0 || n > limit.Count {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: cannot take %d calls under a limit of %d", n, limit.Count)
	}
	rl := redis_rate.Limit{Rate: limit.Count, Burst: limit.Count, Period: limit.Per}
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.rl.AllowN(ctx, l.key("rate:", key), rl, n)
	if err != nil {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: rate limit: %w", err)
	}
	if n == 0 {
		// redis_rate reports what is left; one call needs one whole slot.
		// ResetAfter is when the bucket is full again, so one slot frees
		// (Count-1) emission intervals before that.
		d := gates.LimitDecision{Allowed: res.Remaining >= 1, Remaining: res.Remaining}
		if !d.Allowed {
			interval := limit.Per / time.Duration(limit.Count)
			d.RetryAfter = max(res.ResetAfter-time.Duration(limit.Count-1)*interval, time.Millisecond)
		}
		return d, nil
	}
	d := gates.LimitDecision{Allowed: res.Allowed > 0, Remaining: res.Remaining}
	if !d.Allowed {
		// A refusal always says when to come back.
		d.RetryAfter = max(res.RetryAfter, time.Millisecond)
	}
	return d, nil
}

// rateKeys gives redis_rate the client with its own key prefix ("rate:")
// removed, so that every key stays under Options.Prefix.
type rateKeys struct{ redis.UniversalClient }

const rateLibPrefix = "rate:"

func trimRateKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.TrimPrefix(k, rateLibPrefix)
	}
	return out
}

func (r rateKeys) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.Eval(ctx, script, trimRateKeys(keys), args...)
}

func (r rateKeys) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalSha(ctx, sha1, trimRateKeys(keys), args...)
}

func (r rateKeys) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalRO(ctx, script, trimRateKeys(keys), args...)
}

func (r rateKeys) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalShaRO(ctx, sha1, trimRateKeys(keys), args...)
}

func (r rateKeys) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return r.UniversalClient.Del(ctx, trimRateKeys(keys)...)
}
