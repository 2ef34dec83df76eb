package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis helpers of the benchmarks. redisstore's tests have their own
// (gates/redisstore/internal/redistest), out of reach of this module.

// redisClient returns a client of the Redis at AXGATE_REDIS_URL, set up as
// redisstore.ParseURL does, or skips the benchmark without it. A URL that is
// set but dead fails it.
func redisClient(b *testing.B) *redis.Client {
	b.Helper()
	url := os.Getenv("AXGATE_REDIS_URL")
	if url == "" {
		b.Skip("AXGATE_REDIS_URL is not set: skipping the benchmarks against Redis")
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		b.Fatalf("AXGATE_REDIS_URL: %v", err)
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout = time.Second
	c := redis.NewClient(o)
	b.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Fatalf("redis at %s does not answer: %v", o.Addr, err)
	}
	return c
}

// redisPrefix returns a key prefix of the benchmark's own and deletes its keys
// when the benchmark ends.
func redisPrefix(b *testing.B, c *redis.Client) string {
	var r [6]byte
	rand.Read(r[:])
	name := strings.NewReplacer("/", ".", " ", "_", "*", "_", "?", "_", "[", "_", "]", "_").Replace(b.Name())
	prefix := "axgate-bench:" + name + ":" + hex.EncodeToString(r[:]) + ":"
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var keys []string
		for iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); iter.Next(ctx); {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
}

// roundTrips is a go-redis hook that counts round trips: each command sent
// on its own and each pipeline (or transaction) counts as one.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) Count() int64 { return c.n.Load() }
func (c *roundTrips) Reset()       { c.n.Store(0) }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
