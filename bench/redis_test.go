package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// The Redis stores join the state benchmarks (BenchmarkRateLimitGate,
// BenchmarkLimiterAllowN, BenchmarkIdempotencyGate); without
// AXGATE_REDIS_URL they skip.
func init() {
	benchLimiters["redis"] = func(b *testing.B) gates.Limiter { s, _ := redisBenchStores(b); return s.Limiter }
	benchIdempotencyStores["redis"] = func(b *testing.B) gates.IdempotencyStore {
		s, _ := redisBenchStores(b)
		return s.Idempotency
	}
}

// redisBenchStores returns stores on the Redis at AXGATE_REDIS_URL (or
// skips), under a prefix of the benchmark's own, and the counter of their
// round trips.
func redisBenchStores(b *testing.B) (*redisstore.Stores, *roundTrips) {
	c := redisClient(b)
	n := &roundTrips{}
	c.AddHook(n)
	return redisstore.New(c, redisstore.Options{Prefix: redisPrefix(b, c)}), n
}

// benchStore is one implementation of the stores under comparison; rt is
// nil for the memory stores (no round trips).
type benchStore struct {
	name    string
	replay  token.ReplayStore
	limiter gates.Limiter
	rt      *roundTrips
}

// newBenchStore returns the stores named "memory" or "redis".
func newBenchStore(b *testing.B, name string) benchStore {
	if name == "redis" {
		s, n := redisBenchStores(b)
		return benchStore{name: name, replay: s.Replay, limiter: s.Limiter, rt: n}
	}
	return benchStore{name: name, replay: token.NewMemoryReplayStore(token.MemoryReplayOptions{}), limiter: gate.NewMemoryLimiter(0)}
}

// storeNames are the stores compared, in the order they run.
var storeNames = []string{"memory", "redis"}

// reportRoundTrips reports the store's round trips per operation since the
// counter was last reset.
func reportRoundTrips(b *testing.B, s benchStore, ops int) {
	var n int64
	if s.rt != nil {
		n = s.rt.Count()
	}
	b.ReportMetric(float64(n)/float64(max(ops, 1)), "rt/op")
}

const confirmBenchManifest = `{"version":"1.0.0","actions":[
 {"intent":"order.cancel","entity":"order","action_type":"write","description":"Cancel an order",
  "risk_level":"high","confirmation_required":true,
  "required_parameters":[{"name":"order_id","type":"string","description":"The order"}]}
]}`

var confirmBenchArgs = json.RawMessage(`{"order_id":"o-1"}`)

// BenchmarkRedisConfirmationGate is one call through intent → confirmation →
// commit → tool with a fresh confirmation token each time, on the memory
// replay store and on the Redis one: the gate verifies the token and the
// commit spends it (one Consume, which is also the replay check).
// "replayed" presents a token already spent (refused by that Consume).
// Tokens are signed before the timer starts; rt/op counts round trips to
// Redis per call.
func BenchmarkRedisConfirmationGate(b *testing.B) {
	m, err := manifest.Parse([]byte(confirmBenchManifest))
	if err != nil {
		b.Fatal(err)
	}
	signer, err := token.GenerateDevKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	keys, err := token.NewKeySet(signer.PublicKey())
	if err != nil {
		b.Fatal(err)
	}
	verifier, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: keys, MaxLifetime: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	issuer := token.Issuer{Signer: signer}
	p := principals[0]
	digest, err := middleware.NewCall("order_cancel", confirmBenchArgs, p).ArgsSHA256()
	if err != nil {
		b.Fatal(err)
	}
	mint := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			if out[i], _, err = issuer.Confirmation(p, "order.cancel", digest, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	intent := gate.Intent(m, middleware.Limits{})
	call := func(token string) *middleware.Call {
		c := middleware.NewCall("order_cancel", confirmBenchArgs, p)
		c.Credentials.Confirmation = token
		return c
	}
	for _, name := range storeNames {
		b.Run("store="+name, func(b *testing.B) {
			s := newBenchStore(b, name)
			g, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: verifier, Replay: s.replay})
			if err != nil {
				b.Fatal(err)
			}
			inv := middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
			ctx := context.Background()
			spent := mint(1)[0]
			if _, err := inv.Invoke(ctx, call(spent)); err != nil {
				b.Fatal(err)
			}
			b.Run("allowed", func(b *testing.B) {
				tokens := mint(b.N)
				if s.rt != nil {
					s.rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(ctx, call(tokens[i])); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
			b.Run("replayed", func(b *testing.B) {
				if s.rt != nil {
					s.rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := inv.Invoke(ctx, call(spent)); err == nil {
						b.Fatal("a spent token was accepted")
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
			b.Run("parallel", func(b *testing.B) {
				tokens := mint(b.N)
				if s.rt != nil {
					s.rt.Reset()
				}
				var next atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := inv.Invoke(ctx, call(tokens[next.Add(1)-1])); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
		})
	}
}

// BenchmarkRedisRateLimitGate is one call through intent → rate_limit →
// commit → tool on the memory limiter and on the Redis one: the gate looks at
// the counters (AllowN n=0) and the commit takes one call (n=1), from all of
// them at once. "cooldown_and_rate" is an action declaring both (two
// counters, still one look and one charge; each call a new caller's).
// "refused" is a call over its limit (one look). rt/op counts round trips to Redis per call.
func BenchmarkRedisRateLimitGate(b *testing.B) {
	m := stateBenchSetup(b)
	intent := gate.Intent(m, middleware.Limits{})
	for _, name := range storeNames {
		b.Run("store="+name, func(b *testing.B) {
			s := newBenchStore(b, name)
			inv := middleware.Build(okTool, nil, intent, gate.RateLimit(s.limiter), commitStage)
			ctx := context.Background()
			run := func(b *testing.B, tool string, p middleware.Principal, wantErr bool) {
				if s.rt != nil {
					s.rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := inv.Invoke(ctx, middleware.NewCall(tool, stateBenchArgs, p)); (err != nil) != wantErr {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			}
			b.Run("allowed", func(b *testing.B) { run(b, "report_export", principals[0], false) })
			b.Run("cooldown_and_rate", func(b *testing.B) {
				who := freshPrincipals(b.N)
				inv := inv
				if s.rt == nil {
					// Room for every new caller's two counters, twice over (the
					// shards fill unevenly): the default bound (100,000 busy keys)
					// would refuse the rest.
					inv = middleware.Build(okTool, nil, intent, gate.RateLimit(gate.NewMemoryLimiter(4*b.N+64)), commitStage)
				}
				if s.rt != nil {
					s.rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(ctx, middleware.NewCall("sms_send", stateBenchArgs, who[i])); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
			b.Run("refused", func(b *testing.B) {
				inv.Invoke(ctx, middleware.NewCall("report_tight", stateBenchArgs, principals[1]))
				run(b, "report_tight", principals[1], true)
			})
			b.Run("parallel", func(b *testing.B) {
				if s.rt != nil {
					s.rt.Reset()
				}
				next := make(chan int, len(principals))
				for i := range principals {
					next <- i
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					p := principals[<-next%len(principals)]
					for pb.Next() {
						if _, err := inv.Invoke(ctx, middleware.NewCall("report_export", stateBenchArgs, p)); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
		})
	}
}

// BenchmarkRedisIdempotencyGate is one call of a non-idempotent action
// through intent → idempotency → commit → tool, on the memory store and on
// the Redis one. "keyed" sends a new idempotency key each time (the claim,
// then the stored result), "replay" a key already completed (the stored
// result, the tool does not run), "duplicate_warn" the same call without a
// key (a detected duplicate, warned). rt/op counts round trips to Redis per
// call.
func BenchmarkRedisIdempotencyGate(b *testing.B) {
	m := stateBenchSetup(b)
	intent := gate.Intent(m, middleware.Limits{})
	call := func(key string) *middleware.Call {
		c := middleware.NewCall("order_place", stateBenchArgs, principals[0])
		c.Credentials.IdempotencyKey = key
		return c
	}
	for _, name := range storeNames {
		b.Run("store="+name, func(b *testing.B) {
			var store gates.IdempotencyStore = gate.NewMemoryIdempotencyStore(0)
			var rt *roundTrips
			if name == "redis" {
				var s *redisstore.Stores
				s, rt = redisBenchStores(b)
				store = s.Idempotency
			}
			g, err := gate.NewIdempotency(gates.IdempotencyOptions{Store: store})
			if err != nil {
				b.Fatal(err)
			}
			inv := middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
			ctx := context.Background()
			for _, key := range []string{"replay-key", ""} {
				if _, err := inv.Invoke(ctx, call(key)); err != nil {
					b.Fatal(err)
				}
			}
			// run makes b.N calls with key(i); fresh says each key is new.
			run := func(b *testing.B, fresh bool, key func(i int) string, check func(*middleware.Call) bool) {
				inv := inv
				if fresh {
					// Room for a record per call: the default bounds
					// (100,000 live records per tenant in memory, 1,000
					// per caller) would refuse the rest. Every call is
					// still charged to the caller's quota, under it.
					fs := store
					if rt == nil {
						fs = gate.NewMemoryIdempotencyStore(b.N + 16)
					}
					g, err := gate.NewIdempotency(gates.IdempotencyOptions{Store: fs, Quota: b.N + 16})
					if err != nil {
						b.Fatal(err)
					}
					inv = middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
				}
				keys := make([]string, b.N)
				for i := range keys {
					keys[i] = key(i)
				}
				if rt != nil {
					rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					c := call(keys[i])
					if _, err := inv.Invoke(ctx, c); err != nil || !check(c) {
						b.Fatal(err, c.Facts)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, benchStore{rt: rt}, b.N)
			}
			b.Run("keyed", func(b *testing.B) {
				prefix := rand.Text() // new keys for each round of the benchmark
				run(b, true, func(i int) string { return fmt.Sprint(prefix, "-", i) }, func(c *middleware.Call) bool { return !c.Facts.Replayed })
			})
			b.Run("replay", func(b *testing.B) {
				run(b, false, func(int) string { return "replay-key" }, func(c *middleware.Call) bool { return c.Facts.Replayed })
			})
			b.Run("duplicate_warn", func(b *testing.B) {
				run(b, false, func(int) string { return "" }, func(c *middleware.Call) bool { return len(c.Facts.Warnings) == 1 })
			})
			// A caller at its quota sends a new key: refused (429) in the
			// one round trip of the claim.
			b.Run("over_quota", func(b *testing.B) {
				g, err := gate.NewIdempotency(gates.IdempotencyOptions{Store: store, Quota: 1})
				if err != nil {
					b.Fatal(err)
				}
				inv := middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
				inv.Invoke(ctx, call("replay-key")) // the one record it holds
				prefix := rand.Text()
				if rt != nil {
					rt.Reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(ctx, call(fmt.Sprint(prefix, "-", i))); !errors.Is(err, axerr.CodeRateLimited) {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, benchStore{rt: rt}, b.N)
			})
		})
	}
}
