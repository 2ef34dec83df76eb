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
)

// IdempotencyStore is a gates.IdempotencyStore on Redis. A record is a hash
// (args, state, claim, result or refusal) with an expiry: in flight while the
// call runs, then its outcome. Every operation is one script run (one round
// trip), and the claim token is compared inside the script, so that a call
// whose lease ended cannot complete or release the claim of the call that
// took the key over.
type IdempotencyStore struct{ base }

var _ gates.IdempotencyStore = (*IdempotencyStore)(nil)

// NewIdempotencyStore returns an IdempotencyStore on client.
func NewIdempotencyStore(client redis.UniversalClient, opts Options) *IdempotencyStore {
	return &IdempotencyStore{newBase(client, opts)}
}

// beginScript returns the record held under KEYS[1], or creates an in-flight
// record for the arguments digest ARGV[1], held by the claim ARGV[3] and kept
// ARGV[2] milliseconds, and returns nil.
var beginScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'args', 'state', 'result', 'refusal')
if cur[2] then return {cur[1] or '', cur[2], cur[3] or '', cur[4] or ''} end
redis.call('HSET', KEYS[1], 'args', ARGV[1], 'state', 'in_flight', 'claim', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return false
`)

// completeScript stores the outcome (result ARGV[2], refusal ARGV[3]) in the
// record under KEYS[1] if the claim ARGV[1] holds it, and keeps it ARGV[4]
// milliseconds; it returns 0 when the claim does not hold the record.
var completeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'refusal', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// releaseScript deletes the record under KEYS[1] if the claim ARGV[1] holds
// it in flight; it returns 0 otherwise.
var releaseScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'claim', 'state')
if cur[1] ~= ARGV[1] or cur[2] ~= 'in_flight' then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// Begin claims key for a call with these arguments for ttl and returns the
// claim, or returns the record that holds the key. One round trip.
func (s *IdempotencyStore) Begin(ctx context.Context, key, argsSHA256 string, ttl time.Duration) (*gates.IdempotencyRecord, string, error) {
	if ttl <= 0 {
		return nil, "", errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	claim := rand.Text()
	v, err := beginScript.Run(ctx, s.rdb, []string{s.key("idem:", key)}, argsSHA256, millis(ttl), claim).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, claim, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: claim idempotency key: %w", err)
	}
	if len(v) != 4 {
		return nil, "", fmt.Errorf("redisstore: claim idempotency key: unexpected reply of %d values", len(v))
	}
	rec := &gates.IdempotencyRecord{ArgsSHA256: v[0], State: gates.IdempotencyState(v[1])}
	if v[2] != "" {
		rec.Result = json.RawMessage(v[2])
	}
	if v[3] != "" {
		rec.Refusal = json.RawMessage(v[3])
	}
	return rec, "", nil
}

// Complete stores the outcome of the call that holds claim on key, kept for
// ttl. When the claim no longer holds the key (its lease ended; another call
// may hold it now) it changes nothing and returns gates.ErrNotFound. One
// round trip.
func (s *IdempotencyStore) Complete(ctx context.Context, key, claim string, out gates.IdempotencyOutcome, ttl time.Duration) error {
	if ttl <= 0 {
		return errNoExpiry
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := completeScript.Run(ctx, s.rdb, []string{s.key("idem:", key)}, claim, []byte(out.Result), []byte(out.Refusal), millis(ttl)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: store idempotent outcome: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: idempotency key %q is no longer held by this call: %w", key, gates.ErrNotFound)
	}
	return nil
}

// Release forgets key while claim holds it in flight, so that a retry may
// run the call; otherwise it changes nothing and returns gates.ErrNotFound.
// One round trip.
func (s *IdempotencyStore) Release(ctx context.Context, key, claim string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := releaseScript.Run(ctx, s.rdb, []string{s.key("idem:", key)}, claim).Int()
	if err != nil {
		return fmt.Errorf("redisstore: release idempotency key: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: idempotency key %q is not held in flight by this call: %w", key, gates.ErrNotFound)
	}
	return nil
}
