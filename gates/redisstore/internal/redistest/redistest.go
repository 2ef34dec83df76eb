// Package redistest connects tests and benchmarks to Redis: the shared server
// named by AXGATE_REDIS_URL (tests skip without it), a key prefix of their
// own, a hook that counts round trips, and a private server started for fault
// tests.
package redistest

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

// EnvURL names the environment variable that points tests at a Redis server.
const EnvURL = "AXGATE_REDIS_URL"

// URL returns the Redis URL from AXGATE_REDIS_URL, or skips the test.
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		tb.Skipf("%s is not set: skipping the tests against Redis (.ci/redis.sh prints a URL to export)", EnvURL)
	}
	return url
}

// Client returns a client of the Redis at AXGATE_REDIS_URL (or skips the
// test), closed when the test ends. The server must answer: a URL that is
// set but dead fails the test rather than skipping it silently.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return Dial(tb, URL(tb))
}

// Dial returns a client of the Redis at url, set up as redisstore.ParseURL
// does (context deadlines reach the socket), closed when the test ends. It
// fails the test when the server does not answer.
func Dial(tb testing.TB, url string) *redis.Client {
	tb.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("%s: %v", EnvURL, err)
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout = time.Second
	c := redis.NewClient(o)
	tb.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redis at %s does not answer: %v", o.Addr, err)
	}
	return c
}

// Prefix returns a key prefix no other test uses, and deletes the keys under
// it when the test ends.
func Prefix(tb testing.TB, c redis.UniversalClient) string {
	tb.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "*", "_", "?", "_", "[", "_", "]", "_").Replace(tb.Name())
	prefix := "axgate-test:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
}

// Counter is a go-redis hook that counts round trips: each command sent on
// its own and each pipeline (or transaction) counts as one.
type Counter struct{ n atomic.Int64 }

// Count returns the round trips so far.
func (c *Counter) Count() int64 { return c.n.Load() }

// Reset sets the count back to zero.
func (c *Counter) Reset() { c.n.Store(0) }

// DialHook implements redis.Hook; dialing is not counted.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
