package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
)

// IdempotencyStore is a gates.IdempotencyStore on Redis.
//
// A record is a hash (args, state, claim, result or refusal) with an expiry:
// in flight while the call runs, then its outcome. Every operation is one
// script run (one round trip), and the claim token is compared inside the
// script, so that a call whose lease ended cannot complete or release the
// claim of the call that took the key over.
type idempotencyStore struct{ base }

var _ gates.IdempotencyStore = (*idempotencyStore)(nil)

// NewIdempotencyStore returns an IdempotencyStore on client.
func NewIdempotencyStore(client redis.UniversalClient, opts Options) gates.IdempotencyStore {
	return &idempotencyStore{newBase(client, opts)}
}

// ownerKey is the sorted set of the records charged to an owner's quota:
// each record's key, scored by the time it expires (Unix milliseconds).
func (s *idempotencyStore) ownerKey(o gates.IdempotencyOwner) string {
	return s.key("idemown:", gate.StateKey("o", o.Tenant, o.Principal))
}

// beginScript returns the record held under KEYS[1], or creates an in-flight
// record for the arguments digest ARGV[1], held by the claim ARGV[3] and kept
// ARGV[2] milliseconds, and returns nil. With a quota ARGV[4] > 0, the
// record is charged to the owner's set KEYS[2] first: its expired members
// are dropped, and if it still holds ARGV[4] the script changes nothing and
// returns the milliseconds until its oldest member expires. Redis' own clock
// is the one expiries are measured on.
var beginScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'args', 'state', 'result', 'refusal')
if cur[2] then return {cur[1] or '', cur[2], cur[3] or '', cur[4] or ''} end
local ttl = tonumber(ARGV[2])
local quota = tonumber(ARGV[4])
if quota > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= quota then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return math.max(tonumber(first[2]) - now, 1)
  end
  redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
end
redis.call('HSET', KEYS[1], 'args', ARGV[1], 'state', 'in_flight', 'claim', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
return false
`)

// completeScript stores the outcome (result ARGV[2], refusal ARGV[3]) in the
// record under KEYS[1] if the claim ARGV[1] holds it, and keeps it ARGV[4]
// milliseconds, as long as its owner's set KEYS[2] counts it (when it does);
// it returns 0 when the claim does not hold the record.
var completeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'refusal', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
if redis.call('ZSCORE', KEYS[2], KEYS[1]) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return 1
`)

// releaseScript deletes the record under KEYS[1] if the claim ARGV[1] holds
// it in flight, and uncharges it from its owner's set KEYS[2]; it returns 0
// otherwise.
var releaseScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'claim', 'state')
if cur[1] ~= ARGV[1] or cur[2] ~= 'in_flight' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
`)

// Begin claims key for a call with these arguments for ttl and returns the
// claim, or returns the record that holds the key, or a *gates.QuotaError
// when owner holds owner.Quota live records. One round trip: the quota is
// checked and charged in the same script as the claim.
func (s *idempotencyStore) Begin(ctx context.Context, owner gates.IdempotencyOwner, key, argsSHA256 string, ttl time.Duration) (*gates.IdempotencyRecord, string, error) {
	if ttl <= 0 {
		return nil, "", errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	claim := rand.Text()
	v, err := beginScript.Run(ctx, s.rdb, []string{s.key("idem:", key), s.ownerKey(owner)}, argsSHA256, millis(ttl), claim, max(owner.Quota, 0)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, claim, nil
	}
	if err != nil {
		return nil, "", storeErr("claim idempotency key", err)
	}
	switch v := v.(type) {
	case int64:
		return nil, "", &gates.QuotaError{RetryAfter: time.Duration(v) * time.Millisecond}
	case []any:
		if len(v) != 4 {
			return nil, "", fmt.Errorf("redisstore: claim idempotency key: unexpected reply of %d values", len(v))
		}
		f := make([]string, 4)
		for i, x := range v {
			str, ok := x.(string)
			if !ok {
				return nil, "", fmt.Errorf("redisstore: claim idempotency key: unexpected reply %v", v)
			}
			f[i] = str
		}
		rec := &gates.IdempotencyRecord{ArgsSHA256: f[0], State: gates.IdempotencyState(f[1])}
		if f[2] != "" {
			rec.Result = json.RawMessage(f[2])
		}
		if f[3] != "" {
			rec.Refusal = json.RawMessage(f[3])
		}
		return rec, "", nil
	}
	return nil, "", fmt.Errorf("redisstore: claim idempotency key: unexpected reply %v", v)
}

// Complete stores the outcome of the call that holds claim on key, kept for
// ttl. When the claim no longer holds the key (its lease ended; another call
// may hold it now) it changes nothing and returns gates.ErrNotFound. One
// round trip.
func (s *idempotencyStore) Complete(ctx context.Context, owner gates.IdempotencyOwner, key, claim string, out gates.IdempotencyOutcome, ttl time.Duration) error {
	if ttl <= 0 {
		return errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := completeScript.Run(ctx, s.rdb, []string{s.key("idem:", key), s.ownerKey(owner)}, claim, []byte(out.Result), []byte(out.Refusal), millis(ttl)).Int()
	if err != nil {
		return storeErr("store idempotent outcome", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: idempotency key %q is no longer held by this call: %w", key, gates.ErrNotFound)
	}
	return nil
}

// Release forgets key while claim holds it in flight, so that a retry may
// run the call; otherwise it changes nothing and returns gates.ErrNotFound.
// One round trip.
func (s *idempotencyStore) Release(ctx context.Context, owner gates.IdempotencyOwner, key, claim string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := releaseScript.Run(ctx, s.rdb, []string{s.key("idem:", key), s.ownerKey(owner)}, claim).Int()
	if err != nil {
		return storeErr("release idempotency key", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: idempotency key %q is not held in flight by this call: %w", key, gates.ErrNotFound)
	}
	return nil
}
