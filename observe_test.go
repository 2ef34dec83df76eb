package axgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// observeManifest has a read action every standard gate lets through for
// any authenticated caller, and a write action for refusals.
const observeManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search products",
     "required_parameters": [{"name": "query", "type": "string", "description": "text"}],
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "cart.add_item", "entity": "cart", "action_type": "write", "description": "Add to cart",
     "required_parameters": [{"name": "product_id", "type": "string", "description": "id"}],
     "risk_level": "low", "idempotent": true, "scope": "global", "side_effects": ["inventory_reserved"]}
  ]
}`

type observed struct {
	e      *axgate.Enforcer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	log    *bytes.Buffer
}

func newObserved(t *testing.T, opts ...axgate.Option) *observed {
	t.Helper()
	return newObservedTelemetry(t, middleware.TelemetryConfig{}, opts...)
}

// newObservedTelemetry is newObserved with more telemetry settings: tc's
// providers are replaced by the recorders'.
func newObservedTelemetry(t *testing.T, tc middleware.TelemetryConfig, opts ...axgate.Option) *observed {
	t.Helper()
	m, err := manifest.Parse([]byte(observeManifest))
	if err != nil {
		t.Fatal(err)
	}
	o := &observed{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), log: &bytes.Buffer{}}
	tc.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	tc.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	base := []axgate.Option{
		axgate.WithTelemetry(tc),
		axgate.WithLogger(slog.New(slog.NewJSONHandler(o.log, nil))),
	}
	if o.e, err = axgate.New(m, append(base, opts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.e.Close() })
	return o
}

func searchCall(args string) *middleware.Call {
	return middleware.NewCall("product_search", json.RawMessage(args), middleware.Principal{ID: "u1", Tenant: "t1", Roles: []string{"customer"}})
}

var okTool = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{"items": []any{}}}, nil
})

func (o *observed) span(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := o.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans; want 1", len(ended))
	}
	return ended[0]
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// events renders the gate events as "gate:outcome[:code]"; the summary
// event (axag.gates, the default) as one "gate:pass" per gate it lists.
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, ev := range s.Events() {
		if ev.Name == "axag.gates" {
			for _, kv := range ev.Attributes {
				if kv.Key == "axag.gates.passed" {
					for _, g := range kv.Value.AsStringSlice() {
						out = append(out, g+":pass")
					}
				}
			}
			continue
		}
		a := attrs(ev.Attributes)
		e := a["axag.gate"] + ":" + a["axag.gate.outcome"]
		if a["axag.error.code"] != "" {
			e += ":" + a["axag.error.code"]
		}
		out = append(out, e)
	}
	return out
}

func (o *observed) decisions(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "axag.decisions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				var parts []string
				for _, kv := range dp.Attributes.ToSlice() {
					parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
				}
				out[strings.Join(parts, ",")] += dp.Value
			}
		}
	}
	return out
}

func (o *observed) auditRecords(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(o.log.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestObserveAllowedCall(t *testing.T) {
	o := newObserved(t)
	call := searchCall(`{"query":"red shoes"}`)
	call.ID = "toolu_01"
	if _, err := o.e.Wrap(okTool).Invoke(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	s := o.span(t)
	if s.Name() != "execute_tool product_search" {
		t.Errorf("span name = %q", s.Name())
	}
	if s.SpanKind() != trace.SpanKindInternal {
		t.Errorf("span kind = %v", s.SpanKind())
	}
	a := attrs(s.Attributes())
	for k, v := range map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "product_search", "gen_ai.tool.call.id": "toolu_01",
		"axag.intent": "product.search", "axag.action_type": "read", "axag.risk_level": "none", "axag.decision": "allow",
	} {
		if a[k] != v {
			t.Errorf("%s = %q; want %q", k, a[k], v)
		}
	}
	for _, k := range []string{"axag.error.code", "axag.gate", "gen_ai.tool.call.arguments"} {
		if _, ok := a[k]; ok {
			t.Errorf("%s set on an allowed call", k)
		}
	}
	if strings.Contains(fmt.Sprint(s.Attributes()), "red shoes") {
		t.Error("argument value recorded")
	}
	// One pass event per gate the call went through, in order: a read
	// action with no constraints, conditions, rate limit, confirmation,
	// approval or idempotency concerns goes through only the gates that
	// check every call (TestObserveFullPath has one that goes through all).
	want := []string{"intent:pass", "access:pass", "params:pass", "commit:pass"}
	if got := events(s); !slices.Equal(got, want) {
		t.Errorf("events = %v; want %v", got, want)
	}
	if got, ok := o.e.StagesFor("product_search"); !ok || !slices.Equal(got, []string{"observe", "intent", "access", "params", "commit"}) {
		t.Errorf("StagesFor(product_search) = %v, %v", got, ok)
	}
	if got, ok := o.e.StagesFor("product_delete"); ok || got != nil {
		t.Errorf("StagesFor of an unknown tool = %v, %v", got, ok)
	}
	if s.Status().Code == codes.Error {
		t.Errorf("status = %+v", s.Status())
	}
	if got := o.decisions(t); got["axag.decision=allow,axag.intent=product.search"] != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
	recs := o.auditRecords(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records", len(recs))
	}
	r := recs[0]
	if r["decision"] != "allow" || r["principal"] != "u1" || r["tenant"] != "t1" || r["intent"] != "product.search" ||
		r["trace_id"] != s.SpanContext().TraceID().String() || r["span_id"] != s.SpanContext().SpanID().String() {
		t.Errorf("audit = %v", r)
	}
	if p, _ := json.Marshal(r["params"]); string(p) != `["query"]` {
		t.Errorf("params = %s", p)
	}
}

// fullPathManifest has an action that every gate of the standard chain has
// something to check for.
const fullPathManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "order.refund", "entity": "order", "action_type": "write", "description": "Refund an order",
     "required_parameters": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "number"}],
     "constraints": {"positive": "amount > 0"},
     "preconditions": ["order_open"], "postconditions": ["refund_recorded"],
     "rate_limit": "5/minute", "idempotent": false,
     "risk_level": "medium", "confirmation_required": true,
     "approval_required": true, "approval_roles": ["admin"]}
  ]
}`

// TestObserveFullPath: a call of an action that every gate checks passes
// every stage of the standard chain, and its span has one pass event for
// each, in the chain's order.
func TestObserveFullPath(t *testing.T) {
	m, err := manifest.Parse([]byte(fullPathManifest))
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	e, err := axgate.New(m,
		axgate.WithTelemetry(middleware.TelemetryConfig{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
			MeterProvider:  metricnoop.NewMeterProvider(),
		}),
		axgate.WithPreconditionExpr("order_open", "args.amount < 1000"),
		axgate.WithPostconditionExpr("refund_recorded", "result.recorded == true"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	alice := middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"clerk"}}
	carol := middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"admin"}}
	const args = `{"order_id":"o-1","amount":25}`
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: map[string]any{"recorded": true}}, nil
	})
	confirmation, _, err := e.IssueConfirmation(ctx, alice, "order_refund", json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	call := middleware.NewCall("order_refund", json.RawMessage(args), alice)
	call.Credentials.Confirmation = confirmation
	_, err = e.Wrap(tool).Invoke(ctx, call)
	ae, ok := axerr.As(err)
	if !ok || ae.Code != axerr.CodeApprovalMissing {
		t.Fatalf("without approval: %v; want %s", err, axerr.CodeApprovalMissing)
	}
	_, approval, _, err := e.Approvals().Decide(ctx, carol, ae.Details["approval_request_id"].(string), true, "")
	if err != nil {
		t.Fatal(err)
	}
	call = middleware.NewCall("order_refund", json.RawMessage(args), alice)
	call.Credentials.Confirmation = confirmation
	call.Credentials.Approvals = []string{approval}
	if _, err := e.Wrap(tool).Invoke(ctx, call); err != nil {
		t.Fatalf("confirmed and approved call: %v", err)
	}
	ended := spans.Ended()
	s := ended[len(ended)-1]
	var want []string
	for _, st := range e.Stages() {
		if st != middleware.StageObserve {
			want = append(want, st+":pass")
		}
	}
	if len(want) != 11 {
		t.Fatalf("standard chain %v: want 11 gates", e.Stages())
	}
	if got, _ := e.StagesFor("order_refund"); !slices.Equal(got, e.Stages()) {
		t.Errorf("StagesFor(order_refund) = %v; want the whole chain %v", got, e.Stages())
	}
	if got := events(s); !slices.Equal(got, want) {
		t.Errorf("events = %v; want %v", got, want)
	}
	if a := attrs(s.Attributes()); a["axag.decision"] != "allow" {
		t.Errorf("decision = %q", a["axag.decision"])
	}
}

// refusal is one way a call is refused. A case with a real setup drives the
// real gate; one without simulates the gate by putting a stage of its name
// that refuses with its code where the standard chain has it (or last). When
// a gate lands in the standard chain, give its case a real setup.
type refusal struct {
	gate string
	code axerr.Code
	// call returns a call the real gate refuses; nil simulates the gate.
	call func() *middleware.Call
	tool middleware.Invoker
	// decision is "deny" unless said otherwise.
	decision string
}

var refusals = []refusal{
	{gate: middleware.StageIntent, code: axerr.CodeIntentNotFound, call: func() *middleware.Call {
		return middleware.NewCall("product_delete", json.RawMessage(`{}`), middleware.Principal{ID: "u1"})
	}},
	{gate: middleware.StageParams, code: axerr.CodeMissingParam, call: func() *middleware.Call { return searchCall(`{}`) }},
	{gate: middleware.StageTool, code: axerr.CodeToolFailed, decision: "allow", call: func() *middleware.Call { return searchCall(`{"query":"q"}`) },
		tool: middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
			return middleware.Result{}, errors.New("database is down")
		})},
	{gate: middleware.StageAccess, code: axerr.CodeRoleInsufficient},
	{gate: middleware.StageAccess, code: axerr.CodeScopeViolation},
	{gate: middleware.StageAccess, code: axerr.CodeTenantBoundary},
	{gate: middleware.StageConstraints, code: axerr.CodeOutOfRange},
	{gate: middleware.StagePreconditions, code: axerr.CodePreconditionFailed},
	{gate: middleware.StageRateLimit, code: axerr.CodeRateLimited},
	{gate: middleware.StageConfirmation, code: axerr.CodeConfirmationMissing},
	{gate: middleware.StageApproval, code: axerr.CodeApprovalMissing},
	{gate: middleware.StageIdempotency, code: axerr.CodeDuplicateCall},
	{gate: "my_policy", code: axerr.CodeScopeViolation},
}

// simulate puts a stage named gate that refuses with code in place of the
// standard stage of that name, or last.
func simulate(gate string, code axerr.Code) axgate.Option {
	refuse := middleware.Stage{Name: gate, Interceptor: func(context.Context, *middleware.Call, middleware.Invoker) (middleware.Result, error) {
		return middleware.Result{}, axerr.New(code, "simulated refusal").WithSuggestion("do something else")
	}}
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		out := slices.Clone(std)
		if i := slices.IndexFunc(out, func(s middleware.Stage) bool { return s.Name == gate }); i >= 0 {
			out[i] = refuse
			return out
		}
		return append(out, refuse)
	})
}

func TestObserveRefusalByEachGate(t *testing.T) {
	for _, rc := range refusals {
		t.Run(rc.gate+"/"+string(rc.code), func(t *testing.T) {
			var opts []axgate.Option
			call := searchCall(`{"query":"q"}`)
			if rc.call != nil {
				call = rc.call()
			} else {
				opts = append(opts, simulate(rc.gate, rc.code))
			}
			tool := rc.tool
			if tool == nil {
				tool = okTool
			}
			decision := rc.decision
			if decision == "" {
				decision = "deny"
			}
			o := newObserved(t, opts...)
			_, err := o.e.Wrap(tool).Invoke(context.Background(), call)
			ae, ok := axerr.As(err)
			if !ok || ae.Code != rc.code || ae.Gate != rc.gate {
				t.Fatalf("err = %v (gate %q); want %s from %s", err, gateOf(err), rc.code, rc.gate)
			}
			s := o.span(t)
			a := attrs(s.Attributes())
			for k, v := range map[string]string{"axag.decision": decision, "axag.error.code": string(rc.code), "axag.gate": rc.gate, "error.type": string(rc.code)} {
				if a[k] != v {
					t.Errorf("%s = %q; want %q", k, a[k], v)
				}
			}
			if s.Status().Code != codes.Error || s.Status().Description != string(rc.code) {
				t.Errorf("status = %+v", s.Status())
			}
			ev := events(s)
			if len(ev) == 0 || ev[len(ev)-1] != rc.gate+":deny:"+string(rc.code) {
				t.Fatalf("events = %v; want the last one %s:deny:%s", ev, rc.gate, rc.code)
			}
			for _, e := range ev[:len(ev)-1] {
				if !strings.HasSuffix(e, ":pass") {
					t.Errorf("event before the refusal = %s", e)
				}
			}
			for _, e := range s.Events() {
				if strings.Contains(fmt.Sprint(e.Attributes), "simulated") || strings.Contains(fmt.Sprint(e.Attributes), "database") {
					t.Errorf("event carries a message: %v", e.Attributes)
				}
			}
			intent := ",axag.intent=" + call.Intent()
			if call.Intent() == "" {
				intent = ""
			}
			wantPoint := "axag.decision=" + decision + ",axag.error.code=" + string(rc.code) + intent
			if got := o.decisions(t); got[wantPoint] != 1 || len(got) != 1 {
				t.Errorf("axag.decisions = %v; want {%s: 1}", got, wantPoint)
			}
			recs := o.auditRecords(t)
			if len(recs) != 1 || recs[0]["code"] != string(rc.code) || recs[0]["gate"] != rc.gate || recs[0]["decision"] != decision || recs[0]["level"] != "WARN" {
				t.Errorf("audit = %v", recs)
			}
		})
	}
}

func gateOf(err error) string {
	if ae, ok := axerr.As(err); ok {
		return ae.Gate
	}
	return ""
}

func TestObserveCheckIsMarked(t *testing.T) {
	o := newObserved(t)
	if err := o.e.Check(context.Background(), searchCall(`{"query":"q"}`)); err != nil {
		t.Fatal(err)
	}
	if a := attrs(o.span(t).Attributes()); a["axag.check_only"] != "true" || a["axag.decision"] != "allow" {
		t.Errorf("attributes = %v", a)
	}
	if got := o.decisions(t); got["axag.check_only=true,axag.decision=allow,axag.intent=product.search"] != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
	if recs := o.auditRecords(t); len(recs) != 1 || recs[0]["check_only"] != true {
		t.Errorf("audit = %v", recs)
	}
}

func TestObserveArgumentRecording(t *testing.T) {
	var got []middleware.AuditRecord
	sink := middleware.AuditFunc(func(_ context.Context, r middleware.AuditRecord) { got = append(got, r) })
	o := newObservedTelemetry(t, middleware.TelemetryConfig{RecordArguments: middleware.RedactExcept(), Audit: sink})
	if _, err := o.e.Wrap(okTool).Invoke(context.Background(), searchCall(`{"query":"my address"}`)); err != nil {
		t.Fatal(err)
	}
	if a := attrs(o.span(t).Attributes()); a["gen_ai.tool.call.arguments"] != `{"query":"[REDACTED]"}` {
		t.Errorf("recorded arguments = %q", a["gen_ai.tool.call.arguments"])
	}
	if len(got) != 1 || string(got[0].Arguments) != `{"query":"[REDACTED]"}` || !slices.Equal(got[0].Params, []string{"query"}) {
		t.Errorf("sink records = %+v", got)
	}
	if len(o.auditRecords(t)) != 1 {
		t.Error("the logger lost its record when a sink was added")
	}
}

func TestObserveOffLeavesNoStage(t *testing.T) {
	m, err := manifest.Parse([]byte(observeManifest))
	if err != nil {
		t.Fatal(err)
	}
	off := []axgate.Option{axgate.WithTelemetry(middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})}
	e, err := axgate.New(m, off...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if slices.Contains(e.Stages(), middleware.StageObserve) {
		t.Errorf("stages = %v; want no observe stage with tracing and metrics off", e.Stages())
	}
	var buf bytes.Buffer
	e2, err := axgate.New(m, append(off, axgate.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))...)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, err := e2.Wrap(okTool).Invoke(context.Background(), searchCall(`{"query":"q"}`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"msg":"axgate decision"`) {
		t.Errorf("audit log lost with tracing and metrics off: %q", buf.String())
	}
}

// The audit log of a refused call: one JSON line per decision, with names
// of parameters but never their values.
func ExampleWithLogger() {
	m, err := manifest.Parse([]byte(observeManifest))
	if err != nil {
		panic(err)
	}
	// Leave out what changes from run to run.
	drop := func(_ []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.TimeKey, "duration", "trace_id", "span_id":
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: drop}))
	e, err := axgate.New(m, axgate.WithLogger(logger))
	if err != nil {
		panic(err)
	}
	defer e.Close()
	call := middleware.NewCall("cart_add_item", json.RawMessage(`{"product_id":7}`), middleware.Principal{ID: "alice", Tenant: "acme"})
	_, err = e.Wrap(okTool).Invoke(context.Background(), call)
	fmt.Println(err != nil)
	// Output:
	// {"level":"WARN","msg":"axgate decision","intent":"cart.add_item","tool":"cart_add_item","principal":"alice","tenant":"acme","risk_level":"low","decision":"deny","code":"AXAG_INVALID_TYPE","gate":"params","action_type":"write","params":["product_id"],"side_effects":["inventory_reserved"]}
	// true
}

// TestStagesFollowStandardOrder: the chain an enforcer builds is the one
// gate.StandardOrder documents, so the catalogue cannot drift from the
// chain.
func TestStagesFollowStandardOrder(t *testing.T) {
	o := newObserved(t)
	if got, want := o.e.Stages(), gate.StandardOrder(); !slices.Equal(got, want) {
		t.Errorf("Stages() = %v; want gate.StandardOrder() %v", got, want)
	}
}
