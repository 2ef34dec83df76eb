package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
)

// Limiter is a gates.Limiter on Redis, with the GCRA of github.com/go-redis/redis_rate.
//
// GCRA is the generic cell rate algorithm; the state of a counter is one
// timestamp, its theoretical arrival time. Every decision, over all the
// counters of a call, is one script run: one round trip, atomic.
//
// The counters of one call must hash to one slot with Redis Cluster: give
// Options.Prefix a hash tag (see the package documentation).
type limiter struct{ base }

var _ gates.Limiter = (*limiter)(nil)

// NewLimiter returns a Limiter on client.
func NewLimiter(client redis.UniversalClient, opts Options) gates.Limiter {
	return &limiter{base: newBase(client, opts)}
}

// allowScript is redis_rate's GCRA script (itself from
// github.com/rwz/redis-gcra; Copyright (c) 2017 Pavel Pravosud, and
// Copyright (c) 2013 The github.com/go-redis/redis_rate Authors, BSD 2-Clause
// licence) extended to several counters taken all or nothing: it looks at
// every counter first and writes only when all of them allow.
//
// KEYS are the counters; ARGV[1] is the number of calls to take (0 only
// looks: does one call fit?); then, for each counter, its burst (= rate) and
// its period in seconds. It returns {1, 0, "0", remaining} when allowed, or
// {0, i, wait, 0}: counter i (1-based) refuses longest, for wait seconds.
var allowScript = redis.NewScript(`
-- As in redis_rate: before Redis 5, a script that reads TIME must replicate
-- its effects rather than itself (a no-op from Redis 5 on).
redis.replicate_commands()

local cost = tonumber(ARGV[1])
local need = math.max(cost, 1)

-- now in seconds since 2017-01-01, as redis_rate counts: the values keep
-- their precision in a double.
local t = redis.call('TIME')
local now = (t[1] - 1483228800) + (t[2] / 1000000)

local tats, intervals = {}, {}
local remaining = -1
local refused, wait = 0, 0
for i, key in ipairs(KEYS) do
  local burst = tonumber(ARGV[2 * i])
  local interval = tonumber(ARGV[2 * i + 1]) / burst
  local tat = tonumber(redis.call('GET', key) or '') or now
  tat = math.max(tat, now)
  tats[i], intervals[i] = tat, interval
  -- how early the last of the needed calls would be: < 0 means too early
  local diff = (now - tat) + interval * (burst - need)
  if diff < 0 then
    if -diff > wait then
      refused, wait = i, -diff
    end
  else
    local left = math.floor(diff / interval + 1e-9) + need - cost
    if remaining < 0 or left < remaining then
      remaining = left
    end
  end
end
if refused > 0 then
  return {0, refused, tostring(wait), 0}
end
if cost > 0 then
  for i, key in ipairs(KEYS) do
    local new_tat = tats[i] + intervals[i] * cost
    redis.call('SET', key, new_tat, 'EX', math.max(math.ceil(new_tat - now), 1))
  end
end
return {1, 0, '0', remaining}
`)

// AllowN takes n calls from every counter in keys, all or nothing (see
// gates.Limiter); each counter allows Count calls per Per, in bursts of up to
// Count. With n = 0 it only looks: Allowed says whether one call would be
// allowed now, and nothing is taken. One round trip.
func (l *limiter) AllowN(ctx context.Context, keys []gates.LimitKey, n int) (gates.LimitDecision, error) {
	if len(keys) == 0 {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: no counter to take from")
	}
	rkeys := make([]string, len(keys))
	args := make([]any, 1, 1+2*len(keys))
	args[0] = n
	for i, k := range keys {
		if k.Limit.Count <= 0 || k.Limit.Per <= 0 {
			return gates.LimitDecision{}, fmt.Errorf("redisstore: invalid limit %d per %s", k.Limit.Count, k.Limit.Per)
		}
		if n < 0 || n > k.Limit.Count {
			return gates.LimitDecision{}, fmt.Errorf("redisstore: cannot take %d calls under a limit of %d", n, k.Limit.Count)
		}
		for _, other := range keys[:i] {
			if other.Key == k.Key {
				return gates.LimitDecision{}, fmt.Errorf("redisstore: counter %q asked twice in one call", k.Key)
			}
		}
		rkeys[i] = l.key("rate:", k.Key)
		args = append(args, k.Limit.Count, strconv.FormatFloat(k.Limit.Per.Seconds(), 'f', -1, 64))
	}
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	v, err := allowScript.Run(ctx, l.rdb, rkeys, args...).Slice()
	if err != nil {
		return gates.LimitDecision{}, storeErr("rate limit", err)
	}
	if len(v) != 4 {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: rate limit: unexpected reply of %d values", len(v))
	}
	allowed, ok1 := v[0].(int64)
	by, ok2 := v[1].(int64)
	waitText, ok3 := v[2].(string)
	remaining, ok4 := v[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: rate limit: unexpected reply %v", v)
	}
	if allowed == 1 {
		return gates.LimitDecision{Allowed: true, Remaining: int(max(remaining, 0))}, nil
	}
	wait, err := strconv.ParseFloat(waitText, 64)
	if err != nil || by < 1 || int(by) > len(keys) {
		return gates.LimitDecision{}, fmt.Errorf("redisstore: rate limit: unexpected reply %v", v)
	}
	// A refusal always says when to come back.
	retry := max(time.Duration(wait*float64(time.Second)), time.Millisecond)
	return gates.LimitDecision{RetryAfter: retry, RefusedBy: int(by) - 1}, nil
}
