package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// replicaManifest has one action per shared gate: a confirmation, a rate
// limit, an approval.
const replicaManifest = `{"version":"1.0.0","actions":[
 {"intent":"order.cancel","entity":"order","action_type":"write","description":"Cancel an order",
  "risk_level":"high","confirmation_required":true,
  "required_parameters":[{"name":"order_id","type":"string","description":"The order"}]},
 {"intent":"report.export","entity":"report","action_type":"read","description":"Export a report","rate_limit":"5/minute"},
 {"intent":"refund.issue","entity":"refund","action_type":"write","description":"Issue a refund",
  "risk_level":"medium","approval_required":true,"approval_roles":["manager"],"approval_count":1,
  "required_parameters":[{"name":"amount","type":"number","description":"The amount"}]}
]}`

var (
	replicaAlice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"agent"}}
	replicaBob   = middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"manager"}}
)

// replicas are enforcers of one manifest sharing one Redis, each with a
// client (and connection pool) of its own, as separate processes would.
type replicas struct {
	enf  []*axgate.Enforcer
	tool *replicaTool
}

// replicaTool counts the calls that ran.
type replicaTool struct{ n atomic.Int64 }

func (c *replicaTool) Invoke(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	c.n.Add(1)
	return middleware.Result{Value: map[string]any{"ok": true, "tool": call.Tool}}, nil
}

// newReplicas starts n enforcers on the Redis at url, under one key prefix,
// signing and verifying tokens with one key.
func newReplicas(t *testing.T, url, prefix string, n int, opts redisstore.Options, extra ...axgate.Option) *replicas {
	t.Helper()
	m, err := manifest.Parse([]byte(replicaManifest))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("replicas")
	if err != nil {
		t.Fatal(err)
	}
	opts.Prefix = prefix
	r := &replicas{tool: &replicaTool{}}
	for range n {
		s := redisstore.New(redistest.Dial(t, url), opts)
		e, err := axgate.New(m, append([]axgate.Option{
			axgate.WithSigningKey(signer),
			axgate.WithReplayStore(s.Replay),
			axgate.WithLimiter(s.Limiter),
			axgate.WithIdempotency(gates.IdempotencyOptions{Store: s.Idempotency}),
			axgate.WithApprovalStore(s.Approvals),
		}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		r.enf = append(r.enf, e)
	}
	return r
}

// call runs one call through replica i.
func (r *replicas) call(i int, p middleware.Principal, tool, args string, creds middleware.Credentials) error {
	c := middleware.NewCall(tool, json.RawMessage(args), p)
	c.Credentials = creds
	_, err := r.enf[i].Wrap(r.tool).Invoke(context.Background(), c)
	return err
}

// replicaRefusal returns err as the *axerr.Error a caller sees, with its details
// as they render in the envelope.
func replicaRefusal(t *testing.T, err error) (*axerr.Error, map[string]any) {
	t.Helper()
	ae, ok := axerr.As(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *errors.Error", err, err)
	}
	raw, err := json.Marshal(ae)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return ae, env.Error.Details
}

// TestRedisReplicasSpendConfirmationOnce presents one confirmation token to
// two replicas at the same moment, 200 times over: each time exactly one
// call runs and the other is refused as a replay.
func TestRedisReplicasSpendConfirmationOnce(t *testing.T) {
	url := redistest.URL(t)
	r := newReplicas(t, url, redistest.Prefix(t, redistest.Dial(t, url)), 2, redisstore.Options{Timeout: 5 * time.Second})
	const rounds = 200
	for round := range rounds {
		args := fmt.Sprintf(`{"order_id":"o-%d"}`, round)
		tok, _, err := r.enf[round%2].IssueConfirmation(t.Context(), replicaAlice, "order_cancel", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		creds := middleware.Credentials{Confirmation: tok}
		errs := make([]error, 2)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range 2 {
			done.Go(func() {
				start.Wait()
				errs[i] = r.call(i, replicaAlice, "order_cancel", args, creds)
			})
		}
		start.Done()
		done.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			ae, details := replicaRefusal(t, err)
			if ae.Code != axerr.CodeConfirmationMissing || details["reason"] != string(reasons.TokenUsed) {
				t.Fatalf("round %d: the losing replica refused with %s %v, want %s reason %s", round, ae.Code, details["reason"], axerr.CodeConfirmationMissing, reasons.TokenUsed)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: one token ran %d calls across two replicas, want exactly 1", round, ok)
		}
	}
	if n := r.tool.n.Load(); n != rounds {
		t.Fatalf("the tool ran %d times in %d rounds, want %d", n, rounds, rounds)
	}
}

// TestRedisReplicasShareRateLimit sends calls to two replicas at once: a
// limit of 5 per minute allows 5 calls in all, not 5 per replica.
func TestRedisReplicasShareRateLimit(t *testing.T) {
	url := redistest.URL(t)
	r := newReplicas(t, url, redistest.Prefix(t, redistest.Dial(t, url)), 2, redisstore.Options{Timeout: 5 * time.Second})
	const calls = 20
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { errs[i] = r.call(i%2, replicaAlice, "report_export", `{}`, middleware.Credentials{}) })
	}
	wg.Wait()
	allowed := 0
	for _, err := range errs {
		if err == nil {
			allowed++
			continue
		}
		ae, details := replicaRefusal(t, err)
		if ae.Code != axerr.CodeRateLimited || ae.HTTPStatus() != 429 || details["reason"] != "rate_limit" {
			t.Fatalf("refusal %s (%d) %v, want %s 429 rate_limit", ae.Code, ae.HTTPStatus(), details, axerr.CodeRateLimited)
		}
		if ra, _ := details["retry_after"].(float64); ra <= 0 {
			t.Errorf("rate-limit refusal without retry_after: %v", details)
		}
	}
	if allowed != 5 {
		t.Fatalf("%d concurrent calls on two replicas under 5/minute: %d allowed, want 5", calls, allowed)
	}
	if n := r.tool.n.Load(); n != 5 {
		t.Fatalf("the tool ran %d times, want 5", n)
	}
	// Another caller has a budget of its own, on either replica.
	other := middleware.Principal{ID: "carol", Tenant: "acme"}
	if err := r.call(1, other, "report_export", `{}`, middleware.Credentials{}); err != nil {
		t.Fatalf("another caller refused: %v", err)
	}
}

// TestRedisReplicasShareApprovals asks for approval through one replica,
// lists and decides it through the other, and runs the approved call
// through the first; the approval token then cannot be used again on either.
func TestRedisReplicasShareApprovals(t *testing.T) {
	url := redistest.URL(t)
	r := newReplicas(t, url, redistest.Prefix(t, redistest.Dial(t, url)), 2, redisstore.Options{Timeout: 5 * time.Second})
	ctx := t.Context()
	const args = `{"amount":120}`

	err := r.call(0, replicaAlice, "refund_issue", args, middleware.Credentials{})
	ae, details := replicaRefusal(t, err)
	if ae.Code != axerr.CodeApprovalMissing {
		t.Fatalf("call without approval: %s, want %s", ae.Code, axerr.CodeApprovalMissing)
	}
	id, _ := details["approval_request_id"].(string)
	if id == "" {
		t.Fatalf("no approval_request_id in %v", details)
	}

	inbox, _, err := r.enf[1].Approvals().Pending(ctx, replicaBob, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(inbox) != 1 || inbox[0].ID != id || inbox[0].Requester != "alice" {
		t.Fatalf("the manager's inbox on the other replica: %+v, want request %s from alice", inbox, id)
	}
	_, tok, _, err := r.enf[1].Approvals().Decide(ctx, replicaBob, id, true, "fine")
	if err != nil {
		t.Fatalf("Decide on the other replica: %v", err)
	}
	if inbox, _, err := r.enf[0].Approvals().Pending(ctx, replicaBob, "", 0); err != nil || len(inbox) != 0 {
		t.Fatalf("the first replica still lists the decided request: %+v, %v", inbox, err)
	}
	req, err := r.enf[0].Approvals().Request(ctx, replicaAlice, id)
	if err != nil || req.State != gates.ApprovalApproved {
		t.Fatalf("the first replica sees the request as %q (%v), want approved", req.State, err)
	}

	creds := middleware.Credentials{Approvals: []string{tok}}
	if err := r.call(0, replicaAlice, "refund_issue", args, creds); err != nil {
		t.Fatalf("approved call on the first replica: %v", err)
	}
	for i := range 2 {
		err := r.call(i, replicaAlice, "refund_issue", args, creds)
		if err == nil {
			t.Fatalf("replica %d ran the approved call a second time with the same token", i)
		}
		if ae, _ := replicaRefusal(t, err); ae.Code == axerr.CodeStoreUnavailable {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	// A second decision through the first replica is refused: the request
	// is decided everywhere.
	carol := middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"manager"}}
	if _, _, _, err := r.enf[0].Approvals().Decide(ctx, carol, id, false, "too late"); err == nil {
		t.Fatal("a decided request was decided again through the other replica")
	}
	if n := r.tool.n.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// replicaAudit keeps the audit records of an enforcer.
type replicaAudit struct {
	mu      sync.Mutex
	records []middleware.AuditRecord
}

func (a *replicaAudit) Audit(_ context.Context, r middleware.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.records = append(a.records, r)
}

func (a *replicaAudit) last() middleware.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.records) == 0 {
		return middleware.AuditRecord{}
	}
	return a.records[len(a.records)-1]
}

// TestRedisOutageRefusesWith503 runs two replicas on a Redis of the test's
// own, then freezes it, kills it and brings it back. While Redis cannot
// answer, every call that needs it is refused with AXGATE_STORE_UNAVAILABLE
// (503, retryable), audited and traced, and no tool runs; afterwards the
// calls work again, and a token spent before the outage stays spent.
func TestRedisOutageRefusesWith503(t *testing.T) {
	srv := redistest.StartServer(t)
	log := &replicaAudit{}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	r := newReplicas(t, srv.URL(), "axgate-fault:", 2, redisstore.Options{Timeout: 250 * time.Millisecond},
		axgate.WithTelemetry(middleware.TelemetryConfig{Audit: log, TracerProvider: tp}))
	ctx := t.Context()

	confirmed := func(order string) (string, middleware.Credentials) {
		args := fmt.Sprintf(`{"order_id":%q}`, order)
		tok, _, err := r.enf[0].IssueConfirmation(ctx, replicaAlice, "order_cancel", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return args, middleware.Credentials{Confirmation: tok}
	}
	spentArgs, spent := confirmed("o-spent")
	if err := r.call(0, replicaAlice, "order_cancel", spentArgs, spent); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	heldArgs, held := confirmed("o-held")
	before := r.tool.n.Load()

	// mustRefuse checks that a call is refused because the store is down:
	// 503, retryable, audited and traced as such.
	mustRefuse := func(phase string, i int, tool, args string, creds middleware.Credentials) {
		t.Helper()
		spans.Reset()
		err := r.call(i, replicaAlice, tool, args, creds)
		if err == nil {
			t.Fatalf("%s: %s ran on replica %d while Redis could not answer", phase, tool, i)
		}
		ae, details := replicaRefusal(t, err)
		if ae.Code != axerr.CodeStoreUnavailable || ae.HTTPStatus() != 503 || details["retryable"] != true {
			t.Fatalf("%s: %s refused with %s (%d, retryable %v), want %s 503 retryable", phase, tool, ae.Code, ae.HTTPStatus(), details["retryable"], axerr.CodeStoreUnavailable)
		}
		if rec := log.last(); rec.Tool != tool || rec.Decision != middleware.DecisionDeny || rec.Code != axerr.CodeStoreUnavailable || rec.Gate == "" {
			t.Errorf("%s: audit record %+v, want a denial of %s with %s and its gate", phase, rec, tool, axerr.CodeStoreUnavailable)
		}
		traced := false
		for _, s := range spans.Ended() {
			for _, kv := range s.Attributes() {
				if kv.Key == attribute.Key("axag.error.code") && kv.Value.AsString() == string(axerr.CodeStoreUnavailable) {
					traced = true
				}
			}
		}
		if !traced {
			t.Errorf("%s: no span carries axag.error.code=%s", phase, axerr.CodeStoreUnavailable)
		}
	}
	outage := func(phase string) {
		t.Helper()
		for i := range 2 {
			mustRefuse(phase, i, "order_cancel", heldArgs, held)
			mustRefuse(phase, i, "order_cancel", spentArgs, spent)
			mustRefuse(phase, i, "report_export", `{}`, middleware.Credentials{})
			mustRefuse(phase, i, "refund_issue", `{"amount":5}`, middleware.Credentials{})
		}
		if _, _, err := r.enf[1].Approvals().Pending(ctx, replicaBob, "", 0); !axerr.Is(err, axerr.CodeStoreUnavailable) {
			t.Errorf("%s: Approvals().Pending = %v, want %s", phase, err, axerr.CodeStoreUnavailable)
		}
		if n := r.tool.n.Load(); n != before {
			t.Fatalf("%s: the tool ran %d times during the outage", phase, n-before)
		}
	}
	recovered := func(phase string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := r.call(1, replicaAlice, "report_export", `{}`, middleware.Credentials{})
			if err == nil {
				return
			}
			if !axerr.Is(err, axerr.CodeStoreUnavailable) || time.Now().After(deadline) {
				t.Fatalf("%s: calls did not recover: %v", phase, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	srv.Pause()
	outage("paused")
	srv.Resume()
	recovered("resumed")
	// The token spent before the outage is still spent. The one refused
	// during the outage ran nothing, but the commit's Consume was sent to
	// the frozen Redis, which may apply it on resuming after the client gave
	// up: the token then reads as used. Either way it never runs twice.
	if err := r.call(1, replicaAlice, "order_cancel", spentArgs, spent); !axerr.Is(err, axerr.CodeConfirmationMissing) {
		t.Fatalf("after the pause, the token spent before it: %v, want %s", err, axerr.CodeConfirmationMissing)
	}
	err := r.call(1, replicaAlice, "order_cancel", heldArgs, held)
	if err != nil && !axerr.Is(err, axerr.CodeConfirmationMissing) {
		t.Fatalf("after the pause, the token refused during it: %v", err)
	}
	if err == nil {
		if err := r.call(0, replicaAlice, "order_cancel", heldArgs, held); !axerr.Is(err, axerr.CodeConfirmationMissing) {
			t.Fatalf("after the pause, the token refused during it ran twice: %v", err)
		}
	}
	before = r.tool.n.Load()

	srv.Stop()
	outage("stopped")
	srv.Start()
	recovered("restarted")
}
