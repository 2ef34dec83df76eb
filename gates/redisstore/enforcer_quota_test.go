package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// TestIdempotencyFloodLeavesOthersAlone floods the idempotency gate with
// 100,000 calls, each with a new Idempotency-Key, from one principal of one
// tenant, as the load test did: before, they filled the shared store, and
// every non-idempotent call of every tenant got 503, calls without a key
// too. Now the flooder is refused past its quota (429, reason
// idempotency_quota, retry_after), and another tenant's calls, and another
// principal's of the flooder's own tenant, run as ever, on the memory store
// and on Redis.
func TestIdempotencyFloodLeavesOthersAlone(t *testing.T) {
	const flood = 100_000
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) gates.IdempotencyStore
	}{
		{"memory", func(*testing.T) gates.IdempotencyStore { return nil }},
		{"redis", func(t *testing.T) gates.IdempotencyStore {
			c := redistest.Client(t)
			return redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(t, c), Timeout: 5 * time.Second}).Idempotency
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []axgate.Option
			if s := tc.store(t); s != nil {
				opts = append(opts, axgate.WithIdempotency(gates.IdempotencyOptions{Store: s}))
			}
			inv := stateEnforcer(t, opts...).Wrap(&counterTool{})
			mallory := middleware.Principal{ID: "mallory", Tenant: "cheap"}

			var ran, quota atomic.Int64
			var mu sync.Mutex
			var firstOther error
			var wg sync.WaitGroup
			const workers = 8
			for w := range workers {
				wg.Go(func() {
					for i := w; i < flood; i += workers {
						_, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: mallory, key: fmt.Sprint("flood-", i)}.call())
						switch {
						case err == nil:
							ran.Add(1)
						case errors.Is(err, axerr.CodeRateLimited):
							quota.Add(1)
						default:
							mu.Lock()
							if firstOther == nil {
								firstOther = err
							}
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if firstOther != nil {
				t.Fatalf("the flood got an answer other than 200 or 429: %v", firstOther)
			}
			if ran.Load() != gate.DefaultIdempotencyQuota || quota.Load() != flood-gate.DefaultIdempotencyQuota {
				t.Fatalf("of %d keys, %d ran and %d were refused by the quota; want exactly %d to run", flood, ran.Load(), quota.Load(), gate.DefaultIdempotencyQuota)
			}

			// The flooder's next new key: 429 with the reason and a wait.
			_, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: mallory, key: "one-more"}.call())
			code, status, details := envelopeDetails(t, err)
			if code != axerr.CodeRateLimited || status != 429 || details["reason"] != string(reasons.IdempotencyQuota) || details["retry_after"] == nil {
				t.Fatalf("over the quota: %s %d %v; want 429 AXAG_RATE_LIMITED, reason idempotency_quota, retry_after", code, status, details)
			}
			// A retry of a key it holds is still answered with its outcome.
			if _, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: mallory, key: "flood-0"}.call()); err != nil && !errors.Is(err, axerr.CodeRateLimited) {
				t.Fatalf("retry of a held key: %v", err)
			}

			// Everyone else: keyed and unkeyed calls run.
			for _, who := range []middleware.Principal{alice, aliceElf, {ID: "bob", Tenant: "cheap"}} {
				for i, key := range []string{"k-1", "k-2", ""} {
					args := fmt.Sprintf(`{"sku":"B","qty":%d}`, i+1)
					if _, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: args, who: who, key: key}.call()); err != nil {
						t.Fatalf("%s/%s, key %q, after the flood: %v; want it to run", who.Tenant, who.ID, key, err)
					}
				}
			}
		})
	}
}

// TestIdempotencyQuotaOption: WithIdempotency's Quota sets the caller's quota;
// a key it holds is still answered, a new one is refused (429, reason
// idempotency_quota, retry_after within the window) without the tool
// running, and another caller has a quota of its own.
func TestIdempotencyQuotaOption(t *testing.T) {
	tool := &counterTool{}
	inv := stateEnforcer(t, axgate.WithIdempotency(gates.IdempotencyOptions{Quota: 2, Window: time.Hour})).Wrap(tool)
	call := func(who middleware.Principal, key string) error {
		_, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: who, key: key}.call())
		return err
	}
	for _, key := range []string{"k1", "k2", "k1"} {
		if err := call(alice, key); err != nil {
			t.Fatalf("alice, %s: %v", key, err)
		}
	}
	err := call(alice, "k3")
	code, status, details := envelopeDetails(t, err)
	if code != axerr.CodeRateLimited || status != 429 || details["reason"] != "idempotency_quota" || details["quota"] != float64(2) {
		t.Fatalf("third key: %s %d %v; want 429 AXAG_RATE_LIMITED, reason idempotency_quota, quota 2", code, status, details)
	}
	if ra, _ := details["retry_after"].(float64); ra < 1 || ra > 3600 {
		t.Fatalf("retry_after %v; want when the oldest record ends, within the 1h window", details["retry_after"])
	}
	if n := tool.n.Load(); n != 2 {
		t.Fatalf("the tool ran %d times; want 2 (k1 once, k2 once)", n)
	}
	for _, who := range []middleware.Principal{bob, aliceElf} {
		if err := call(who, "k3"); err != nil {
			t.Fatalf("%s/%s with its own quota: %v", who.Tenant, who.ID, err)
		}
	}
}
