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
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// Decisions held server-side (axgate.WithDecisionPages) on the shared
// stores: the decision is in Redis, so any replica runs the repeat, once.

const decisionsManifest = `{"version":"1.0.0","actions":[
 {"intent":"file.write","entity":"file","action_type":"write","description":"Write a file",
  "risk_level":"medium","confirmation_required":true,"confirmation_message":"Write {{path}}?",
  "required_parameters":[{"name":"path","type":"string","description":"Where"}]},
 {"intent":"payout.send","entity":"payout","action_type":"write","description":"Send a payout",
  "risk_level":"low","approval_required":true,"approval_roles":["finance"],"approval_count":2,
  "required_parameters":[{"name":"amount","type":"number","description":"How much"}]}
]}`

const decisionsBase = "http://127.0.0.1:8081/"

var (
	decAlice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"clerk"}}
	decBob   = middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"finance"}}
	decCarol = middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"finance"}}
)

// eachDecisionStores runs f with n enforcers with decision pages that share one
// set of stores: the memory stores, or Redis when AXGATE_REDIS_URL is set
// (run f once for each).
func eachDecisionStores(t *testing.T, n int, f func(t *testing.T, replicas []*axgate.Enforcer)) {
	m, err := manifest.Parse([]byte(decisionsManifest))
	if err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, opts ...axgate.Option) []*axgate.Enforcer {
		var out []*axgate.Enforcer
		for range max(n, 1) {
			e, err := axgate.New(m, append(opts, axgate.WithDecisionPages(decisionsBase))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			out = append(out, e)
		}
		return out
	}
	buildOne := func(t *testing.T, opts ...axgate.Option) []*axgate.Enforcer {
		e, err := axgate.New(m, append(opts, axgate.WithDecisionPages(decisionsBase))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return []*axgate.Enforcer{e}
	}
	t.Run("memory", func(t *testing.T) {
		// One process's stores, shared by the enforcers as Redis is.
		replay := token.NewMemoryReplayStore(token.MemoryReplayOptions{})
		approvals := memstore.NewApprovalStore(memstore.ApprovalOptions{})
		f(t, build(t, axgate.WithReplayStore(replay), axgate.WithApprovalStore(approvals)))
	})
	t.Run("redis", func(t *testing.T) {
		url := redistest.URL(t)
		prefix := redistest.Prefix(t, redistest.Dial(t, url))
		var replicas []*axgate.Enforcer
		for range n {
			// Each replica has a client of its own on the same Redis.
			s := redisstore.New(redistest.Dial(t, url), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
			replicas = append(replicas, buildOne(t, axgate.WithReplayStore(s.Replay), axgate.WithLimiter(s.Limiter),
				axgate.WithIdempotency(gates.IdempotencyOptions{Store: s.Idempotency}), axgate.WithApprovalStore(s.Approvals))...)
		}
		f(t, replicas)
	})
}

func decCall(e *axgate.Enforcer, tool middleware.Invoker, name, args string, p middleware.Principal) (*middleware.Call, error) {
	c := middleware.NewCall(name, json.RawMessage(args), p)
	_, err := e.Wrap(tool).Invoke(context.Background(), c)
	return c, err
}

// TestDecisionOnOneReplicaRunsOnAnotherOnce: replica A records the
// confirmation request and its requester confirms it there; the repeat on
// replica B runs, once; the next repeat, on either, is refused and opens a
// new request.
func TestDecisionOnOneReplicaRunsOnAnotherOnce(t *testing.T) {
	eachDecisionStores(t, 2, func(t *testing.T, r []*axgate.Enforcer) {
		a, b := r[0], r[1]
		tool := &counterTool{}
		const args = `{"path":"/tmp/x"}`
		_, err := decCall(a, tool, "file_write", args, decAlice)
		code, status, d := envelopeDetails(t, err)
		id, _ := d["decision_id"].(string)
		if code != axerr.CodeConfirmationMissing || status != 428 || id == "" || d["decision_url"] != decisionsBase+"requests/"+id {
			t.Fatalf("%s %d %v", code, status, d)
		}
		if _, _, _, err := a.Approvals().Decide(context.Background(), decAlice, id, true, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := decCall(b, tool, "file_write", args, decAlice); err != nil {
			t.Fatalf("repeat on replica B: %v", err)
		}
		for _, e := range r {
			_, err := decCall(e, tool, "file_write", args, decAlice)
			if code, _, d := envelopeDetails(t, err); code != axerr.CodeConfirmationMissing || d["request_state"] != "pending" {
				t.Fatalf("repeat after the run: %s %v", code, d)
			}
		}
		if tool.n.Load() != 1 {
			t.Fatalf("tool ran %d times, want 1", tool.n.Load())
		}
	})
}

// TestConcurrentRepeatsOfAConfirmedCallRunOnce: 40 repeats at once of a
// confirmed call, spread over two replicas: the tool runs once; every other
// repeat is AXAG_CONFIRMATION_MISSING.
func TestConcurrentRepeatsOfAConfirmedCallRunOnce(t *testing.T) {
	eachDecisionStores(t, 2, func(t *testing.T, r []*axgate.Enforcer) {
		tool := &counterTool{}
		for round := range 3 {
			args := fmt.Sprintf(`{"path":"/tmp/%d"}`, round)
			_, err := decCall(r[0], tool, "file_write", args, decAlice)
			_, _, d := envelopeDetails(t, err)
			id, _ := d["decision_id"].(string)
			if _, _, _, err := r[0].Approvals().Decide(context.Background(), decAlice, id, true, ""); err != nil {
				t.Fatal(err)
			}
			before := tool.n.Load()
			var ran, refused atomic.Int32
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range 40 {
				done.Go(func() {
					start.Wait()
					_, err := decCall(r[i%len(r)], tool, "file_write", args, decAlice)
					switch {
					case err == nil:
						ran.Add(1)
					case axerr.Is(err, axerr.CodeConfirmationMissing):
						refused.Add(1)
					default:
						t.Errorf("repeat: %v", err)
					}
				})
			}
			start.Done()
			done.Wait()
			if ran.Load() != 1 || refused.Load() != 39 || tool.n.Load()-before != 1 {
				t.Fatalf("round %d: %d ran, %d refused, tool ran %d times; want exactly 1", round, ran.Load(), refused.Load(), tool.n.Load()-before)
			}
		}
	})
}

// TestApprovalDecidedOnPagesRunsOnAnotherReplica: a 2-of-2 approval
// recorded on replica A, approved by one approver on each replica, runs on
// the repeat on replica B without tokens, once.
func TestApprovalDecidedOnPagesRunsOnAnotherReplica(t *testing.T) {
	eachDecisionStores(t, 2, func(t *testing.T, r []*axgate.Enforcer) {
		a, b := r[0], r[1]
		tool := &counterTool{}
		const args = `{"amount":900}`
		_, err := decCall(a, tool, "payout_send", args, decAlice)
		code, _, d := envelopeDetails(t, err)
		id, _ := d["decision_id"].(string)
		if code != axerr.CodeApprovalMissing || id != d["approval_request_id"] || d["decision_url"] != decisionsBase+"requests/"+id {
			t.Fatalf("%s %v", code, d)
		}
		ctx := context.Background()
		if _, _, _, err := a.Approvals().Decide(ctx, decBob, id, true, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := decCall(b, tool, "payout_send", args, decAlice); !axerr.Is(err, axerr.CodeApprovalMissing) {
			t.Fatalf("repeat after 1 of 2 approvals: %v", err)
		}
		if _, _, _, err := b.Approvals().Decide(ctx, decCarol, id, true, ""); err != nil {
			t.Fatal(err)
		}
		c, err := decCall(b, tool, "payout_send", args, decAlice)
		if err != nil {
			t.Fatalf("repeat after 2 of 2 approvals: %v", err)
		}
		if fmt.Sprint(c.Facts.Approvers) != "[bob carol]" || c.Facts.ApprovalRequestID != id {
			t.Fatalf("facts %+v", c.Facts)
		}
		if _, err := decCall(a, tool, "payout_send", args, decAlice); !axerr.Is(err, axerr.CodeApprovalMissing) {
			t.Fatalf("repeat after the run: %v", err)
		}
		if req, err := a.Approvals().Request(ctx, decAlice, id); err != nil || req.State != gates.ApprovalPending {
			t.Fatalf("the request after the run and a repeat: %s, %v; want a new pending request", req.State, err)
		}
		if tool.n.Load() != 1 {
			t.Fatalf("tool ran %d times, want 1", tool.n.Load())
		}
	})
}
