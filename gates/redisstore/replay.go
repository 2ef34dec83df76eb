package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/token"
)

// ReplayStore is a token.ReplayStore on Redis: a used token id is a key that
// lives until the token expires, plus Options.ClockSkew.
type replayStore struct{ base }

var _ token.ReplayStore = (*replayStore)(nil)

// NewReplayStore returns a ReplayStore on client.
func NewReplayStore(client redis.UniversalClient, opts Options) token.ReplayStore {
	return &replayStore{newBase(client, opts)}
}

// consumeScript marks every key used, or none if any of them is: the check
// and the writes run as one script, so no other client interleaves.
// KEYS: the token keys; ARGV[i]: the time to keep KEYS[i], in milliseconds.
var consumeScript = redis.NewScript(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], '1', 'PX', ARGV[i])
end
return 1
`)

// Consume marks every id used, atomically: if any was used already (or one
// id is given twice) it returns token.ErrReplayed and marks none. One round
// trip.
func (s *replayStore) Consume(ctx context.Context, uses []token.Use) error {
	if len(uses) == 0 {
		return nil
	}
	now := time.Now()
	keys := make([]string, 0, len(uses))
	ttls := make([]any, 0, len(uses))
	index := make(map[string]struct{}, len(uses))
	for _, u := range uses {
		if u.Expires.IsZero() {
			return fmt.Errorf("redisstore: token id %q has no expiry", u.ID)
		}
		// Keep the id while any replica may still accept the token.
		ttl := millis(u.Expires.Sub(now) + s.opts.ClockSkew)
		k := s.key("jti:", u.ID)
		if _, dup := index[k]; dup {
			// One token presented twice in one call is a replay, as in
			// the memory store.
			return token.ErrReplayed
		}
		index[k] = struct{}{}
		keys = append(keys, k)
		ttls = append(ttls, ttl)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var fresh bool
	if len(keys) == 1 {
		ok, err := s.rdb.SetNX(ctx, keys[0], "1", time.Duration(ttls[0].(int64))*time.Millisecond).Result()
		if err != nil {
			return storeErr("consume token", err)
		}
		fresh = ok
	} else {
		n, err := consumeScript.Run(ctx, s.rdb, keys, ttls...).Int()
		if err != nil {
			return storeErr("consume tokens", err)
		}
		fresh = n == 1
	}
	if !fresh {
		return token.ErrReplayed
	}
	return nil
}

// Used reports whether id was marked used. One round trip.
func (s *replayStore) Used(ctx context.Context, id string) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := s.rdb.Exists(ctx, s.key("jti:", id)).Result()
	if err != nil {
		return false, storeErr("look up token", err)
	}
	return n == 1, nil
}
