package redisstore_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
)

// Every replica of a tool server opens the same Redis and hands the stores to
// its enforcer; with the same signing key (or JWKS) on every replica, a token
// issued by one is accepted, once, by any of them.
func ExampleOpen() {
	ctx := context.Background()
	stores, err := redisstore.Open(ctx, os.Getenv("AXGATE_REDIS_URL"), redisstore.Options{})
	if err != nil {
		log.Fatal(err) // Redis does not answer: refuse to start rather than run unshared
	}
	defer stores.Close()

	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m,
		axgate.WithJWKSFile("keys.jwks.json"),
		axgate.WithReplayStore(stores.Replay),
		axgate.WithLimiter(stores.Limiter),
		axgate.WithIdempotency(gates.IdempotencyOptions{Store: stores.Idempotency}),
		axgate.WithApprovalStore(stores.Approvals),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()
}

// A client of your own (Sentinel, Cluster, TLS, ...) works too. Let context
// deadlines reach the socket so that a stalled server is given up on after
// Options.Timeout; with Redis Cluster, a hash tag in the prefix keeps the keys
// a script touches in one slot.
func ExampleNew() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	stores := redisstore.New(client, redisstore.Options{
		Prefix:  "{axgate}:",
		Timeout: 150 * time.Millisecond,
	})
	_ = stores // hand stores.Replay, stores.Limiter, ... to axgate.New
}

// ParseURL gives client options set up for the stores, to adjust before
// making the client.
func ExampleParseURL() {
	opt, err := redisstore.ParseURL("redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	opt.PoolSize = 50
	stores := redisstore.New(redis.NewClient(opt), redisstore.Options{})
	defer stores.Client().Close()
}
