package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// benchLimiters are the Limiter implementations the rate-limit benchmarks
// run against, by name. Another store joins the comparison by adding itself
// from its own file:
//
//	func init() { benchLimiters["redis"] = newRedisLimiter }
//
// A constructor that cannot run here (no server) calls b.Skip.
var benchLimiters = map[string]func(b *testing.B) gates.Limiter{
	"memory": func(*testing.B) gates.Limiter { return gate.NewMemoryLimiter(0) },
}

// benchIdempotencyStores are the IdempotencyStore implementations, likewise.
var benchIdempotencyStores = map[string]func(b *testing.B) gates.IdempotencyStore{
	"memory": func(*testing.B) gates.IdempotencyStore { return gate.NewMemoryIdempotencyStore(0) },
}

// stateBenchManifest has a read action without limits (the baseline), one
// with a rate limit that a benchmark never reaches, one with a tight limit
// (every call after the first is refused), one with a cooldown and a rate
// limit (benchmarks call it as a new caller each time), and a non-idempotent
// write.
const stateBenchManifest = `{"version":"1.0.0","actions":[
 {"intent":"catalog.search","entity":"catalog","action_type":"read","description":"Search"},
 {"intent":"report.export","entity":"report","action_type":"read","description":"Export","rate_limit":"1000000000/second"},
 {"intent":"report.tight","entity":"report","action_type":"read","description":"Export","rate_limit":"1/day"},
 {"intent":"sms.send","entity":"sms","action_type":"write","description":"Send","rate_limit":"10/hour","cooldown":"1h"},
 {"intent":"order.place","entity":"order","action_type":"write","description":"Place","idempotent":false,
  "required_parameters":[{"name":"sku","type":"string","description":"Item"}]}
]}`

var stateBenchArgs = []byte(`{"sku":"A-1"}`)

func stateBenchSetup(b *testing.B) *manifest.Manifest {
	b.Helper()
	m, err := manifest.Parse([]byte(stateBenchManifest))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// commitStage runs the deferred work as the standard chain's commit stage
// does: the rate-limit charge happens there.
var commitStage = middleware.Stage{Name: "commit", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	if err := call.RunCommits(ctx); err != nil {
		return middleware.Result{}, err
	}
	return next.Invoke(ctx, call)
}}

var okTool = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: "ok"}, nil
})

// principals gives each parallel goroutine its own caller, so that "keys"
// benchmarks spread over many counters.
var principals = func() []middleware.Principal {
	ps := make([]middleware.Principal, 64)
	for i := range ps {
		ps[i] = middleware.Principal{ID: fmt.Sprint("user-", i), Tenant: "acme"}
	}
	return ps
}()

// freshPrincipals returns n callers never seen before, for calls that must
// each be a caller's first (under a cooldown).
func freshPrincipals(n int) []middleware.Principal {
	run := rand.Text()
	ps := make([]middleware.Principal, n)
	for i := range ps {
		ps[i] = middleware.Principal{ID: fmt.Sprint(run, "-", i), Tenant: "acme"}
	}
	return ps
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// BenchmarkRateLimitGate is one call through intent → rate_limit → commit →
// tool: the stage looks at the counter (AllowN n=0) and the commit charges it
// (n=1). "baseline" is the same chain without the rate-limit stage; the
// difference is the gate's cost. "cooldown_and_rate" is an action declaring
// both (two counters, still one look and one charge), each call a new
// caller's. "refused" is a call
// over its limit (one look, refused). "parallel" runs GOMAXPROCS goroutines on one key ("one
// key") or on a key each ("keys").
func BenchmarkRateLimitGate(b *testing.B) {
	m := stateBenchSetup(b)
	intent := gate.Intent(m, middleware.Limits{})
	run := func(b *testing.B, inv middleware.Invoker, tool string, p middleware.Principal, wantErr bool) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			_, err := inv.Invoke(ctx, middleware.NewCall(tool, stateBenchArgs, p))
			if (err != nil) != wantErr {
				b.Fatal(err)
			}
		}
	}
	b.Run("baseline", func(b *testing.B) {
		run(b, middleware.Build(okTool, nil, intent, commitStage), "report_export", principals[0], false)
	})
	for _, name := range sortedNames(benchLimiters) {
		b.Run("store="+name, func(b *testing.B) {
			l := benchLimiters[name](b)
			inv := middleware.Build(okTool, nil, intent, gate.RateLimit(l), commitStage)
			b.Run("allowed", func(b *testing.B) { run(b, inv, "report_export", principals[0], false) })
			b.Run("cooldown_and_rate", func(b *testing.B) {
				who := freshPrincipals(b.N)
				inv := inv
				if name == "memory" {
					// Room for every new caller's two counters, twice over (the
					// shards fill unevenly): the default bound (100,000 busy keys)
					// would refuse the rest.
					inv = middleware.Build(okTool, nil, intent, gate.RateLimit(gate.NewMemoryLimiter(4*b.N+64)), commitStage)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(context.Background(), middleware.NewCall("sms_send", stateBenchArgs, who[i])); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("no_limit_declared", func(b *testing.B) { run(b, inv, "catalog_search", principals[0], false) })
			b.Run("refused", func(b *testing.B) {
				inv.Invoke(context.Background(), middleware.NewCall("report_tight", stateBenchArgs, principals[1]))
				run(b, inv, "report_tight", principals[1], true)
			})
			b.Run("parallel/one_key", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := inv.Invoke(context.Background(), middleware.NewCall("report_export", stateBenchArgs, principals[0])); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("parallel/keys", func(b *testing.B) {
				b.ReportAllocs()
				next := make(chan int, len(principals))
				for i := range principals {
					next <- i
				}
				b.RunParallel(func(pb *testing.PB) {
					p := principals[<-next%len(principals)]
					for pb.Next() {
						if _, err := inv.Invoke(context.Background(), middleware.NewCall("report_export", stateBenchArgs, p)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkLimiterAllowN is the store alone: one AllowN(n=1) under a limit
// that is never reached, on one counter ("one_counter") or on a cooldown and
// a rate limit at once ("two_counters", what the gate asks for an action
// declaring both).
func BenchmarkLimiterAllowN(b *testing.B) {
	limit := gates.Limit{Count: 1_000_000_000, Per: time.Second}
	rate := gates.LimitKey{Key: "rate:4:acme:6:user-1:13:report.export", Limit: limit}
	cooldown := gates.LimitKey{Key: "cooldown:4:acme:6:user-1:13:report.export", Limit: gates.Limit{Count: 1, Per: time.Nanosecond}}
	for _, name := range sortedNames(benchLimiters) {
		b.Run("store="+name, func(b *testing.B) {
			l := benchLimiters[name](b)
			ctx := context.Background()
			for _, tc := range []struct {
				name string
				keys []gates.LimitKey
			}{
				{"one_counter", []gates.LimitKey{rate}},
				{"two_counters", []gates.LimitKey{cooldown, rate}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := l.AllowN(ctx, tc.keys, 1); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkIdempotencyGate is one call of a non-idempotent action through
// intent → idempotency → commit → tool. "replay" sends a key already
// completed (the stored result comes back, the tool does not run);
// "duplicate_warn" sends the same call without a key (a detected duplicate,
// warned); "baseline" is the chain without the gate.
func BenchmarkIdempotencyGate(b *testing.B) {
	m := stateBenchSetup(b)
	intent := gate.Intent(m, middleware.Limits{})
	call := func(key string) *middleware.Call {
		c := middleware.NewCall("order_place", stateBenchArgs, principals[0])
		c.Credentials.IdempotencyKey = key
		return c
	}
	b.Run("baseline", func(b *testing.B) {
		inv := middleware.Build(okTool, nil, intent, commitStage)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := inv.Invoke(context.Background(), call("")); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range sortedNames(benchIdempotencyStores) {
		b.Run("store="+name, func(b *testing.B) {
			g, err := gate.NewIdempotency(gates.IdempotencyOptions{Store: benchIdempotencyStores[name](b)})
			if err != nil {
				b.Fatal(err)
			}
			inv := middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
			for _, key := range []string{"replay-key", ""} {
				if _, err := inv.Invoke(context.Background(), call(key)); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("replay", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c := call("replay-key")
					if _, err := inv.Invoke(context.Background(), c); err != nil || !c.Facts.Replayed {
						b.Fatal(err)
					}
				}
			})
			b.Run("duplicate_warn", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c := call("")
					if _, err := inv.Invoke(context.Background(), c); err != nil || len(c.Facts.Warnings) != 1 {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
