package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
)

// IdempotencyStore is a gates.IdempotencyStore on Redis. A record is a hash
// (args, state, result) with an expiry: in flight while the call runs, then
// the stored result.
type IdempotencyStore struct{ base }

var _ gates.IdempotencyStore = (*IdempotencyStore)(nil)

// NewIdempotencyStore returns an IdempotencyStore on client.
func NewIdempotencyStore(client redis.UniversalClient, opts Options) *IdempotencyStore {
	return &IdempotencyStore{newBase(client, opts)}
}

// beginScript returns the record held under KEYS[1], or creates an in-flight
// record for the arguments digest ARGV[1] kept ARGV[2] milliseconds and
// returns nil.
var beginScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'args', 'state', 'result')
if cur[2] then return {cur[1] or '', cur[2], cur[3] or ''} end
redis.call('HSET', KEYS[1], 'args', ARGV[1], 'state', 'in_flight')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return false
`)

// completeScript stores the result ARGV[1] in the record under KEYS[1] and
// keeps it ARGV[2] milliseconds; it returns 0 when the record is gone.
var completeScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// Begin claims key for a call with these arguments for ttl, or returns the
// record that holds it. One round trip.
func (s *IdempotencyStore) Begin(ctx context.Context, key, argsSHA256 string, ttl time.Duration) (*gates.IdempotencyRecord, bool, error) {
	if ttl <= 0 {
		return nil, false, errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := beginScript.Run(ctx, s.rdb, []string{s.key("idem:", key)}, argsSHA256, millis(ttl)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: claim idempotency key: %w", err)
	}
	if len(v) != 3 {
		return nil, false, fmt.Errorf("redisstore: claim idempotency key: unexpected reply of %d values", len(v))
	}
	rec := &gates.IdempotencyRecord{ArgsSHA256: v[0], State: gates.IdempotencyState(v[1])}
	if v[2] != "" {
		rec.Result = json.RawMessage(v[2])
	}
	return rec, false, nil
}

// Complete stores the result of the call that claimed key, kept for ttl.
// When the claim has expired meanwhile there is nothing to complete, and it
// returns gates.ErrNotFound. One round trip.
func (s *IdempotencyStore) Complete(ctx context.Context, key string, result json.RawMessage, ttl time.Duration) error {
	if ttl <= 0 {
		return errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := completeScript.Run(ctx, s.rdb, []string{s.key("idem:", key)}, []byte(result), millis(ttl)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: store idempotent result: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: idempotency key %q expired before the call completed: %w", key, gates.ErrNotFound)
	}
	return nil
}

// Release forgets key, so that a retry may run the call again. One round
// trip.
func (s *IdempotencyStore) Release(ctx context.Context, key string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.rdb.Del(ctx, s.key("idem:", key)).Err(); err != nil {
		return fmt.Errorf("redisstore: release idempotency key: %w", err)
	}
	return nil
}
