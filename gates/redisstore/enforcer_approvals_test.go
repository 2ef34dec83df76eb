package redisstore_test

import (
	"context"
	"encoding/json"
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
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// quotaManifest has an approval-required action, and one that also
// declares a rate limit.
const quotaManifest = `{"version":"1.0.0","actions":[
 {"intent":"refund.issue","entity":"refund","action_type":"write","description":"Issue a refund",
  "risk_level":"medium","approval_required":true,"approval_roles":["manager"],
  "required_parameters":[{"name":"amount","type":"number","description":"The amount"}]},
 {"intent":"refund.limited","entity":"refund","action_type":"write","description":"Issue a limited refund",
  "risk_level":"medium","approval_required":true,"approval_roles":["manager"],"rate_limit":"2/minute",
  "required_parameters":[{"name":"amount","type":"number","description":"The amount"}]}
]}`

// eachApprovalStore runs f with an enforcer on the memory stores and, when
// AXGATE_REDIS_URL is set, on Redis.
func eachApprovalStore(t *testing.T, f func(t *testing.T, enf *axgate.Enforcer)) {
	m, err := manifest.Parse([]byte(quotaManifest))
	if err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, opts ...axgate.Option) *axgate.Enforcer {
		e, err := axgate.New(m, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	t.Run("memory", func(t *testing.T) { f(t, build(t)) })
	t.Run("redis", func(t *testing.T) {
		url := redistest.URL(t)
		c := redistest.Dial(t, url)
		s := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(t, c), Timeout: 5 * time.Second})
		f(t, build(t, axgate.WithReplayStore(s.Replay), axgate.WithLimiter(s.Limiter),
			axgate.WithIdempotency(gates.IdempotencyOptions{Store: s.Idempotency}), axgate.WithApprovalStore(s.Approvals)))
	})
}

func quotaCall(enf *axgate.Enforcer, p middleware.Principal, tool string, amount int) error {
	c := middleware.NewCall(tool, json.RawMessage(fmt.Sprintf(`{"amount":%d}`, amount)), p)
	ok := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, nil
	})
	_, err := enf.Wrap(ok).Invoke(context.Background(), c)
	return err
}

func quotaCode(err error) axerr.Code {
	if e, ok := axerr.As(err); ok {
		return e.Code
	}
	return "not an *errors.Error"
}

// TestApprovalQuotaConcurrent: 8 rounds of 100 concurrent distinct calls of
// one requester each: exactly the quota's requests are opened (428), the
// rest are 429 approval_quota, never more, never a 503.
func TestApprovalQuotaConcurrent(t *testing.T) {
	eachApprovalStore(t, func(t *testing.T, enf *axgate.Enforcer) {
		for round := range 8 {
			p := middleware.Principal{ID: fmt.Sprint("racer-", round), Tenant: "acme", Roles: []string{"agent"}}
			codes := make([]axerr.Code, 100)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range codes {
				done.Go(func() {
					start.Wait()
					codes[i] = quotaCode(quotaCall(enf, p, "refund_issue", i+1))
				})
			}
			start.Done()
			done.Wait()
			n := map[axerr.Code]int{}
			for _, c := range codes {
				n[c]++
			}
			if n[axerr.CodeApprovalMissing] != gate.DefaultApprovalQuota || n[axerr.CodeRateLimited] != 100-gate.DefaultApprovalQuota {
				t.Fatalf("round %d: %v; want exactly %d requests opened", round, n, gate.DefaultApprovalQuota)
			}
		}
		inbox, _, err := enf.Approvals().Pending(t.Context(), middleware.Principal{ID: "boss", Tenant: "acme", Roles: []string{"manager"}}, "", gate.MaxApprovalPage)
		if err != nil || len(inbox) != gate.MaxApprovalPage {
			t.Fatalf("inbox: %d, %v", len(inbox), err)
		}
	})
}

// TestApprovalRequestChargesRateLimit: opening a request is a side effect
// and charges the action's rate limit (2/minute): the third distinct call is
// 429 rate_limit and opens nothing (today it was only looked at, never
// charged, and every distinct call opened a request).
func TestApprovalRequestChargesRateLimit(t *testing.T) {
	eachApprovalStore(t, func(t *testing.T, enf *axgate.Enforcer) {
		alice := middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"agent"}}
		for i := range 2 {
			if c := quotaCode(quotaCall(enf, alice, "refund_limited", i+1)); c != axerr.CodeApprovalMissing {
				t.Fatalf("call %d: %s", i, c)
			}
		}
		err := quotaCall(enf, alice, "refund_limited", 3)
		if e, ok := axerr.As(err); !ok || e.Code != axerr.CodeRateLimited || e.Details["reason"] != "rate_limit" {
			t.Fatalf("third request: %v", err)
		}
		inbox, _, err := enf.Approvals().Pending(t.Context(), middleware.Principal{ID: "boss", Tenant: "acme", Roles: []string{"manager"}}, "", 0)
		if err != nil || len(inbox) != 2 {
			t.Fatalf("inbox: %d requests, %v; want 2", len(inbox), err)
		}
	})
}

// TestApprovalFloodSparesOtherTenants floods one tenant with 25,000
// approval-required calls (1,000 principals, 25 calls each: each past its
// quota of 20 open requests, 20,000 open in the tenant): another
// tenant's call still gets 428 (never 503), no flood call gets 503, and the
// flooded tenant's approver still reads the inbox a page at a time.
func TestApprovalFloodSparesOtherTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the stores")
	}
	eachApprovalStore(t, func(t *testing.T, enf *axgate.Enforcer) {
		const principals, calls, workers = 1000, 25, 8
		var unavailable, opened atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < principals*calls; i += workers {
					p := middleware.Principal{ID: fmt.Sprint("flooder-", i%principals), Tenant: "flood", Roles: []string{"agent"}}
					switch quotaCode(quotaCall(enf, p, "refund_issue", i+1)) {
					case axerr.CodeStoreUnavailable:
						unavailable.Add(1)
					case axerr.CodeApprovalMissing:
						opened.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if unavailable.Load() != 0 || opened.Load() != principals*gate.DefaultApprovalQuota {
			t.Fatalf("flood: %d calls got 503, %d requests opened; want 0 and %d", unavailable.Load(), opened.Load(), principals*gate.DefaultApprovalQuota)
		}
		other := middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"agent"}}
		if c := quotaCode(quotaCall(enf, other, "refund_issue", 1)); c != axerr.CodeApprovalMissing {
			t.Fatalf("another tenant's call after the flood: %s, want AXAG_APPROVAL_MISSING", c)
		}
		page, next, err := enf.Approvals().Pending(t.Context(), middleware.Principal{ID: "boss", Tenant: "flood", Roles: []string{"manager"}}, "", 0)
		if err != nil || len(page) != gate.DefaultApprovalPage || next == "" {
			t.Fatalf("the flooded tenant's inbox: %d, next %q, %v", len(page), next, err)
		}
	})
}

// TestApprovalDecidedOnceConcurrently: 100 concurrent approvals of one
// request by the same approver mint exactly one token; the others are 409
// already_decided.
func TestApprovalDecidedOnceConcurrently(t *testing.T) {
	eachApprovalStore(t, func(t *testing.T, enf *axgate.Enforcer) {
		alice := middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"agent"}}
		e, ok := axerr.As(quotaCall(enf, alice, "refund_issue", 5))
		if !ok || e.Code != axerr.CodeApprovalMissing {
			t.Fatalf("the call: %v", e)
		}
		id, _ := e.Details["approval_request_id"].(string)
		boss := middleware.Principal{ID: "boss", Tenant: "acme", Roles: []string{"manager"}}
		var minted, decided atomic.Int32
		var start, done sync.WaitGroup
		start.Add(1)
		for range 100 {
			done.Go(func() {
				start.Wait()
				_, tok, _, err := enf.Approvals().Decide(context.Background(), boss, id, true, "")
				switch {
				case err == nil && tok != "":
					minted.Add(1)
				case axerr.Is(err, axerr.CodeAlreadyDecided):
					decided.Add(1)
				default:
					t.Errorf("Decide: %v", err)
				}
			})
		}
		start.Done()
		done.Wait()
		if minted.Load() != 1 || decided.Load() != 99 {
			t.Fatalf("%d tokens minted, %d refused as already decided; want 1 and 99", minted.Load(), decided.Load())
		}
	})
}
