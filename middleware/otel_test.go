package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const telemetryManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search products",
     "required_parameters": [{"name": "query", "type": "string", "description": "text"}],
     "risk_level": "none"},
    {"intent": "order.place", "entity": "order", "action_type": "write", "description": "Place an order",
     "required_parameters": [{"name": "cart_id", "type": "string", "description": "cart"}],
     "risk_level": "high", "side_effects": ["payment_charged", "email_sent"]}
  ]
}`

type telemetryRig struct {
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	audit   []middleware.AuditRecord
	tel     *middleware.Telemetry
	m       *manifest.Manifest
	sampled bool
}

func newTelemetryRig(t *testing.T, cfg middleware.TelemetryConfig, sample bool) *telemetryRig {
	t.Helper()
	m, err := manifest.Parse([]byte(telemetryManifest))
	if err != nil {
		t.Fatal(err)
	}
	r := &telemetryRig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), m: m}
	sampler := sdktrace.AlwaysSample()
	if !sample {
		sampler = sdktrace.NeverSample()
	}
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans), sdktrace.WithSampler(sampler))
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	cfg.Audit = middleware.AuditFunc(func(_ context.Context, rec middleware.AuditRecord) { r.audit = append(r.audit, rec) })
	if r.tel, err = middleware.NewTelemetry(m, cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

// resolve is a stand-in for the intent gate.
func (r *telemetryRig) resolve() middleware.Stage {
	return middleware.Stage{Name: "intent", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if c.Action = r.m.Tool(c.Tool); c.Action == nil {
			return middleware.Result{}, axerr.New(axerr.CodeIntentNotFound, "no such tool")
		}
		return next.Invoke(ctx, c)
	}}
}

func (r *telemetryRig) run(t *testing.T, call *middleware.Call, tool middleware.Invoker, stages ...middleware.Stage) error {
	t.Helper()
	all := append([]middleware.Stage{r.tel.Stage(), r.resolve()}, stages...)
	_, err := middleware.Build(tool, r.tel, all...).Invoke(context.Background(), call)
	return err
}

func passStage(name string) middleware.Stage {
	return middleware.Stage{Name: name, Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		return next.Invoke(ctx, c)
	}}
}

func refuseStage(name string, e error) middleware.Stage {
	return middleware.Stage{Name: name, Interceptor: func(context.Context, *middleware.Call, middleware.Invoker) (middleware.Result, error) {
		return middleware.Result{}, e
	}}
}

var okTool = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: "ok"}, nil
})

func attrMap(kvs []attribute.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func wantAttrs(t *testing.T, what string, got []attribute.KeyValue, want map[string]string) {
	t.Helper()
	m := attrMap(got)
	for k, v := range want {
		if v == "<absent>" {
			if g, ok := m[k]; ok {
				t.Errorf("%s: %s = %q; want it absent", what, k, g)
			}
			continue
		}
		if m[k] != v {
			t.Errorf("%s: %s = %q; want %q", what, k, m[k], v)
		}
	}
}

// gateEvents renders a span's gate events as "gate:outcome[:code]".
func gateEvents(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, ev := range s.Events() {
		if ev.Name != "axag.gate" {
			continue
		}
		m := attrMap(ev.Attributes)
		e := m["axag.gate"] + ":" + m["axag.gate.outcome"]
		if c := m["axag.error.code"]; c != "" {
			e += ":" + c
		}
		out = append(out, e)
	}
	return out
}

func oneSpan(t *testing.T, r *telemetryRig) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := r.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended; want 1", len(ended))
	}
	return ended[0]
}

func collect(t *testing.T, r *telemetryRig) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != middleware.InstrumentationName {
			t.Errorf("scope = %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// counterPoints renders a counter's points as "attr=value,…" → count.
func counterPoints(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T; want Sum[int64]", m.Name, m.Data)
	}
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		out[setString(dp.Attributes)] += dp.Value
	}
	return out
}

func histogramCounts(t *testing.T, m metricdata.Metrics) map[string]uint64 {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T; want Histogram[float64]", m.Name, m.Data)
	}
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		out[setString(dp.Attributes)] += dp.Count
	}
	return out
}

func setString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

func TestTelemetryAllowedCall(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll, GateDurations: true}, true)
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"secret-value"}`), middleware.Principal{ID: "u1", Tenant: "t1"})
	call.ID = "call-7"
	if err := r.run(t, call, okTool, passStage("params")); err != nil {
		t.Fatal(err)
	}
	s := oneSpan(t, r)
	if s.Name() != "execute_tool product_search" {
		t.Errorf("span name = %q", s.Name())
	}
	wantAttrs(t, "span", s.Attributes(), map[string]string{
		"gen_ai.operation.name":      "execute_tool",
		"gen_ai.tool.name":           "product_search",
		"gen_ai.tool.call.id":        "call-7",
		"axag.intent":                "product.search",
		"axag.action_type":           "read",
		"axag.risk_level":            "none",
		"axag.decision":              "allow",
		"axag.error.code":            "<absent>",
		"axag.gate":                  "<absent>",
		"gen_ai.tool.call.arguments": "<absent>",
	})
	for _, kv := range s.Attributes() {
		if strings.Contains(kv.Value.Emit(), "secret-value") {
			t.Errorf("argument value recorded in %s", kv.Key)
		}
	}
	if got := gateEvents(s); !slices.Equal(got, []string{"intent:pass", "params:pass"}) {
		t.Errorf("events = %v", got)
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status = %v", s.Status())
	}

	ms := collect(t, r)
	if got := counterPoints(t, ms["axag.decisions"]); got["axag.decision=allow,axag.intent=product.search"] != 1 || len(got) != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
	if got := histogramCounts(t, ms["axag.call.duration"]); got["axag.decision=allow,axag.intent=product.search"] != 1 {
		t.Errorf("axag.call.duration = %v", got)
	}
	if ms["axag.call.duration"].Unit != "s" || ms["axag.gate.duration"].Unit != "s" {
		t.Errorf("units = %q, %q", ms["axag.call.duration"].Unit, ms["axag.gate.duration"].Unit)
	}
	if got := histogramCounts(t, ms["axag.gate.duration"]); got["axag.gate=intent"] != 1 || got["axag.gate=params"] != 1 || len(got) != 2 {
		t.Errorf("axag.gate.duration = %v", got)
	}

	if len(r.audit) != 1 {
		t.Fatalf("%d audit records", len(r.audit))
	}
	a := r.audit[0]
	if a.Decision != "allow" || a.Intent != "product.search" || a.PrincipalID != "u1" || a.Tenant != "t1" || a.CallID != "call-7" ||
		!slices.Equal(a.Params, []string{"query"}) || a.Arguments != nil || a.Code != "" {
		t.Errorf("audit = %+v", a)
	}
	if a.TraceID != s.SpanContext().TraceID().String() || a.SpanID != s.SpanContext().SpanID().String() {
		t.Errorf("audit trace %s/%s; span %s", a.TraceID, a.SpanID, s.SpanContext().SpanID())
	}
}

func TestTelemetryRefusals(t *testing.T) {
	params := axerr.New(axerr.CodeMissingParam, "cart_id is missing")
	params.Violations = []axerr.Violation{{Path: "/cart_id", Message: "missing", Keyword: "required"}}
	cases := []struct {
		name     string
		tool     string
		stages   []middleware.Stage
		inv      middleware.Invoker
		code     axerr.Code
		gate     string
		decision string
		events   []string
		paths    string
	}{
		{name: "intent", tool: "nope", code: axerr.CodeIntentNotFound, gate: "intent", decision: "deny",
			events: []string{"intent:deny:AXAG_INTENT_NOT_FOUND"}},
		{name: "params", tool: "order_place", stages: []middleware.Stage{passStage("access"), refuseStage("params", params)},
			code: axerr.CodeMissingParam, gate: "params", decision: "deny",
			events: []string{"intent:pass", "access:pass", "params:deny:AXAG_MISSING_PARAM"}, paths: "[\"/cart_id\"]"},
		{name: "tool failure", tool: "order_place", stages: []middleware.Stage{passStage("params")},
			inv: middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
				e := axerr.New(axerr.CodeToolFailed, "the tool failed")
				e.Gate = "tool"
				return middleware.Result{}, e
			}),
			code: axerr.CodeToolFailed, gate: "tool", decision: "allow",
			events: []string{"intent:pass", "params:pass", "tool:deny:AXGATE_TOOL_FAILED"}},
		{name: "after the tool", tool: "order_place", stages: []middleware.Stage{{Name: "postconditions", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			if _, err := next.Invoke(ctx, c); err != nil {
				return middleware.Result{}, err
			}
			return middleware.Result{}, axerr.New(axerr.CodePostconditionFailed, "no order")
		}}},
			code: axerr.CodePostconditionFailed, gate: "postconditions", decision: "deny",
			events: []string{"intent:pass", "postconditions:pass", "postconditions:deny:AXGATE_POSTCONDITION_FAILED"}},
		{name: "plain error", tool: "order_place", stages: []middleware.Stage{refuseStage("custom", errors.New("boom"))},
			code: axerr.CodeInternal, decision: "deny", events: []string{"intent:pass", "custom:deny"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll}, true)
			inv := tc.inv
			if inv == nil {
				inv = okTool
			}
			call := middleware.NewCall(tc.tool, json.RawMessage(`{"cart_id":"c-1"}`), middleware.Principal{ID: "u1"})
			if err := r.run(t, call, inv, tc.stages...); err == nil {
				t.Fatal("call allowed")
			}
			s := oneSpan(t, r)
			gate := tc.gate
			if gate == "" {
				gate = "<absent>"
			}
			wantAttrs(t, "span", s.Attributes(), map[string]string{
				"axag.decision":   tc.decision,
				"axag.error.code": string(tc.code),
				"error.type":      string(tc.code),
				"axag.gate":       gate,
			})
			if s.Status().Code != codes.Error || s.Status().Description != string(tc.code) {
				t.Errorf("status = %+v", s.Status())
			}
			if got := gateEvents(s); !slices.Equal(got, tc.events) {
				t.Errorf("events = %v; want %v", got, tc.events)
			}
			if tc.paths != "" {
				last := s.Events()[len(s.Events())-1]
				if got := attrMap(last.Attributes)["axag.error.paths"]; got != tc.paths {
					t.Errorf("paths = %s; want %s", got, tc.paths)
				}
			}
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					if strings.Contains(kv.Value.Emit(), "missing") || strings.Contains(kv.Value.Emit(), "c-1") {
						t.Errorf("event records a message or value: %s=%s", kv.Key, kv.Value.Emit())
					}
				}
			}
			intent := ",axag.intent=order.place"
			if tc.tool == "nope" {
				intent = ""
				if s.Name() != "execute_tool" {
					t.Errorf("span name = %q", s.Name())
				}
				wantAttrs(t, "span", s.Attributes(), map[string]string{"gen_ai.tool.name": "nope", "axag.intent": "<absent>"})
			}
			got := counterPoints(t, collect(t, r)["axag.decisions"])
			want := "axag.decision=" + tc.decision + ",axag.error.code=" + string(tc.code) + intent
			if got[want] != 1 || len(got) != 1 {
				t.Errorf("axag.decisions = %v; want %s", got, want)
			}
			if len(r.audit) != 1 || r.audit[0].Code != tc.code || r.audit[0].Gate != tc.gate || r.audit[0].Decision != tc.decision {
				t.Errorf("audit = %+v", r.audit)
			}
		})
	}
}

func TestTelemetryUnsampledStillMeasuresAndAudits(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, false)
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), middleware.Principal{})
	if err := r.run(t, call, okTool); err != nil {
		t.Fatal(err)
	}
	if n := len(r.spans.Ended()); n != 0 {
		t.Errorf("%d spans recorded with NeverSample", n)
	}
	if got := counterPoints(t, collect(t, r)["axag.decisions"]); got["axag.decision=allow,axag.intent=product.search"] != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
	if len(r.audit) != 1 || r.audit[0].TraceID == "" {
		t.Errorf("audit = %+v; want one record with the (unsampled) trace id", r.audit)
	}
}

func TestTelemetryArgumentRecording(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{RecordArguments: middleware.RedactExcept("query")}, true)
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"shoes","card":"4111"}`), middleware.Principal{})
	if err := r.run(t, call, okTool); err != nil {
		t.Fatal(err)
	}
	want := `{"card":"[REDACTED]","query":"shoes"}`
	wantAttrs(t, "span", oneSpan(t, r).Attributes(), map[string]string{"gen_ai.tool.call.arguments": want})
	if string(r.audit[0].Arguments) != want {
		t.Errorf("audit arguments = %s", r.audit[0].Arguments)
	}
	// The redactor worked on a copy: the call's own arguments are intact.
	if args, _ := call.Args(); args["card"] != "4111" {
		t.Errorf("call arguments changed: %v", args)
	}
}

func TestTelemetryNoopProvidersDisable(t *testing.T) {
	tel, err := middleware.NewTelemetry(nil, middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() {
		t.Error("Enabled with no-op providers and no audit")
	}
	tel, _ = middleware.NewTelemetry(nil, middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(),
		Audit: middleware.SlogAudit(slog.New(slog.DiscardHandler))})
	if !tel.Enabled() {
		t.Error("not Enabled with an audit sink")
	}
	tel, _ = middleware.NewTelemetry(nil, middleware.TelemetryConfig{})
	if !tel.Enabled() {
		t.Error("not Enabled with the global providers")
	}
}

func TestSlogAudit(t *testing.T) {
	var buf bytes.Buffer
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	sink := middleware.SlogAudit(slog.New(slog.NewJSONHandler(&buf, nil)))
	tel, err := middleware.NewTelemetry(r.m, middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Audit: sink})
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c-secret"}`), middleware.Principal{ID: "alice", Tenant: "acme"})
	call.Facts = middleware.Facts{ConfirmationJTI: "jti-1", Approvers: []string{"bob"}, ApprovalRequestID: "req-9"}
	refusal := axerr.New(axerr.CodeRateLimited, "slow down")
	if err := r.run(t, call, okTool, refuseStage("rate_limit", refusal)); err == nil {
		t.Fatal("allowed")
	}
	if strings.Contains(buf.String(), "c-secret") {
		t.Errorf("audit log holds an argument value: %s", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := map[string]any{
		"msg": "axgate decision", "level": "WARN", "intent": "order.place", "tool": "order_place", "principal": "alice", "tenant": "acme",
		"risk_level": "high", "decision": "deny", "code": "AXAG_RATE_LIMITED", "gate": "rate_limit",
		"confirmation_jti": "jti-1", "confirmation_elicited": false, "approval_request_id": "req-9",
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v; want %v", k, rec[k], v)
		}
	}
	for k, v := range map[string]string{"params": `["cart_id"]`, "approvers": `["bob"]`, "side_effects": `["payment_charged","email_sent"]`} {
		got, _ := json.Marshal(rec[k])
		if string(got) != v {
			t.Errorf("%s = %s; want %s", k, got, v)
		}
	}
	if _, ok := rec["trace_id"]; ok {
		t.Errorf("trace_id present without a span: %v", rec["trace_id"])
	}
}

func TestTelemetryRefusalEventsOnly(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsRefusals, GateDurations: true}, true)
	call := middleware.NewCall("order_place", json.RawMessage(`{}`), middleware.Principal{})
	if err := r.run(t, call, okTool, passStage("access"), refuseStage("params", axerr.New(axerr.CodeMissingParam, "missing"))); err == nil {
		t.Fatal("allowed")
	}
	if got := gateEvents(oneSpan(t, r)); !slices.Equal(got, []string{"params:deny:AXAG_MISSING_PARAM"}) {
		t.Errorf("events = %v; want the refusal only", got)
	}
	if got := histogramCounts(t, collect(t, r)["axag.gate.duration"]); got["axag.gate=access"] != 1 || got["axag.gate=params"] != 1 {
		t.Errorf("axag.gate.duration = %v; want every gate timed", got)
	}
}

// Two telemetry stages on one call (an enforcer's chain inside another's):
// each span gets the events of its own chain only, and the outer span keeps
// hearing its gates after the inner chain returned.
func TestTelemetryNestedChains(t *testing.T) {
	outer := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll}, true)
	inner := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll}, true)
	innerChain := middleware.Build(okTool, inner.tel, inner.tel.Stage(), passStage("inner_gate"))
	tool := middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		return innerChain.Invoke(ctx, c)
	})
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), middleware.Principal{})
	if err := outer.run(t, call, tool, passStage("outer_gate"), refuseAfter("post", axerr.New(axerr.CodePostconditionFailed, "no"))); err == nil {
		t.Fatal("allowed")
	}
	if got := gateEvents(oneSpan(t, inner)); !slices.Equal(got, []string{"inner_gate:pass"}) {
		t.Errorf("inner events = %v", got)
	}
	want := []string{"intent:pass", "outer_gate:pass", "post:pass", "post:deny:AXGATE_POSTCONDITION_FAILED"}
	if got := gateEvents(oneSpan(t, outer)); !slices.Equal(got, want) {
		t.Errorf("outer events = %v; want %v", got, want)
	}
}

// refuseAfter is a stage that runs the rest of the chain and then refuses.
func refuseAfter(name string, e error) middleware.Stage {
	return middleware.Stage{Name: name, Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if _, err := next.Invoke(ctx, c); err != nil {
			return middleware.Result{}, err
		}
		return middleware.Result{}, e
	}}
}

// The stage used without the chain's observer (Build with a nil Observer) still traces, measures
// and audits the call; only the gate events and times need the observer.
func TestTelemetryStageWithoutObserver(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	inv := middleware.Build(okTool, nil, r.tel.Stage())
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), middleware.Principal{ID: "u1"})
	if _, err := inv.Invoke(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	s := oneSpan(t, r)
	wantAttrs(t, "span", s.Attributes(), map[string]string{"axag.decision": "allow", "axag.intent": "product.search"})
	if len(s.Events()) != 0 {
		t.Errorf("events = %v; want none without an observer", gateEvents(s))
	}
	if len(r.audit) != 1 || r.audit[0].Time.IsZero() || r.audit[0].Duration < 0 {
		t.Errorf("audit = %+v", r.audit)
	}
	if got := histogramCounts(t, collect(t, r)["axag.call.duration"]); got["axag.decision=allow,axag.intent=product.search"] != 1 {
		t.Errorf("axag.call.duration = %v", got)
	}
}

// A chain observed by a Telemetry whose stage it lacks adds nothing to the
// span another Telemetry started for the same call.
func TestTelemetryForeignObserver(t *testing.T) {
	outer := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll}, true)
	other := newTelemetryRig(t, middleware.TelemetryConfig{GateEvents: middleware.GateEventsAll, GateDurations: true}, true)
	innerChain := middleware.Build(okTool, other.tel, passStage("inner_gate"))
	tool := middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		return innerChain.Invoke(ctx, c)
	})
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), middleware.Principal{})
	if err := outer.run(t, call, tool); err != nil {
		t.Fatal(err)
	}
	if got := gateEvents(oneSpan(t, outer)); !slices.Equal(got, []string{"intent:pass"}) {
		t.Errorf("outer events = %v; want its own gate only", got)
	}
	if got := histogramCounts(t, collect(t, other)["axag.gate.duration"]); got["axag.gate=inner_gate"] != 1 {
		t.Errorf("the other telemetry's axag.gate.duration = %v", got)
	}
}

// GateEventsSummary, the default (the zero TelemetryConfig): one axag.gates
// event lists the gates passed, in order, before the refusal's own event (or
// at the end of an allowed call).
func TestTelemetrySummaryEvents(t *testing.T) {
	events := func(s sdktrace.ReadOnlySpan) []string {
		var out []string
		for _, ev := range s.Events() {
			m := attrMap(ev.Attributes)
			switch ev.Name {
			case "axag.gates":
				out = append(out, "passed:"+m["axag.gates.passed"])
			case "axag.gate":
				out = append(out, m["axag.gate"]+":"+m["axag.gate.outcome"])
			default:
				out = append(out, "?"+ev.Name)
			}
		}
		return out
	}
	toolFails := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		e := axerr.New(axerr.CodeToolFailed, "the tool failed")
		e.Gate = "tool"
		return middleware.Result{}, e
	})
	cases := []struct {
		name   string
		tool   string
		inv    middleware.Invoker
		stages []middleware.Stage
		want   []string
	}{
		{"allowed", "product_search", okTool, []middleware.Stage{passStage("access"), passStage("params")},
			[]string{`passed:["intent","access","params"]`}},
		{"refused", "order_place", okTool, []middleware.Stage{passStage("access"), refuseStage("params", axerr.New(axerr.CodeMissingParam, "missing"))},
			[]string{`passed:["intent","access"]`, "params:deny"}},
		{"refused first", "nope", okTool, nil, []string{"intent:deny"}},
		{"tool failure", "order_place", toolFails, []middleware.Stage{passStage("params")},
			[]string{`passed:["intent","params"]`, "tool:deny"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
			// Twice: the second call takes the prepared event and a pooled state.
			for range 2 {
				call := middleware.NewCall(tc.tool, json.RawMessage(`{"query":"x"}`), middleware.Principal{})
				_ = r.run(t, call, tc.inv, tc.stages...)
			}
			for _, s := range r.spans.Ended() {
				if got := events(s); !slices.Equal(got, tc.want) {
					t.Errorf("events = %v; want %v", got, tc.want)
				}
			}
		})
	}
}

// A tool that panics still ends its span and leaves an audit record; the
// panic goes on to the caller unchanged.
func TestTelemetryToolPanic(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	boom := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) { panic("boom") })
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v; want the tool's own panic", p)
			}
		}()
		_ = r.run(t, middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c"}`), middleware.Principal{ID: "alice"}), boom)
	}()
	if len(r.spans.Ended()) != 1 {
		t.Fatalf("%d spans ended; want 1", len(r.spans.Ended()))
	}
	if len(r.audit) != 1 || r.audit[0].Code != axerr.CodeInternal {
		t.Fatalf("audit = %+v; want one AXGATE_INTERNAL record", r.audit)
	}
}

// Only declared parameter names reach the audit log; the caller's other
// keys are counted, since a key can carry a value.
func TestAuditRecordsDeclaredNamesOnly(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c","password=hunter2":1,"x":2}`), middleware.Principal{ID: "alice"})
	_ = r.run(t, call, okTool)
	if len(r.audit) != 1 {
		t.Fatalf("audit = %+v", r.audit)
	}
	got := strings.Join(r.audit[0].Params, ",")
	if got != "cart_id,+2 undeclared" {
		t.Fatalf("params = %q", got)
	}
}

// Recording: explicit SDK providers record; explicit no-op ones do not;
// the default global providers with nothing installed (this test binary
// installs none) do not, and neither does a Telemetry with an audit sink
// only, which AuditStage serves alone.
func TestTelemetryRecording(t *testing.T) {
	m, err := manifest.Parse([]byte(telemetryManifest))
	if err != nil {
		t.Fatal(err)
	}
	sink := middleware.AuditFunc(func(context.Context, middleware.AuditRecord) {})
	for _, tc := range []struct {
		name                string
		cfg                 middleware.TelemetryConfig
		recording, auditing bool
	}{
		{"sdk", middleware.TelemetryConfig{TracerProvider: sdktrace.NewTracerProvider()}, true, false},
		{"sdk meter only", middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: sdkmetric.NewMeterProvider()}, true, false},
		{"noop", middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}, false, false},
		{"global, none installed", middleware.TelemetryConfig{}, false, false},
		{"global with audit", middleware.TelemetryConfig{Audit: sink}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel, err := middleware.NewTelemetry(m, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tel.Recording() != tc.recording || tel.Auditing() != tc.auditing {
				t.Errorf("Recording %v, Auditing %v; want %v, %v", tel.Recording(), tel.Auditing(), tc.recording, tc.auditing)
			}
		})
	}
}

// AuditStage audits a call, a refusal and a panic, with no span and no
// Observer.
func TestTelemetryAuditStage(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	inv := middleware.Build(okTool, nil, r.tel.AuditStage(), r.resolve())
	if _, err := inv.Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), middleware.Principal{ID: "u1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Invoke(context.Background(), middleware.NewCall("nope", json.RawMessage(`{}`), middleware.Principal{ID: "u1"})); err == nil {
		t.Fatal("unknown tool allowed")
	}
	if len(r.audit) != 2 || r.audit[0].Decision != "allow" || r.audit[0].Intent != "product.search" ||
		r.audit[1].Decision != "deny" || r.audit[1].Code != axerr.CodeIntentNotFound || r.audit[0].TraceID != "" {
		t.Errorf("audit = %+v", r.audit)
	}
	if n := len(r.spans.Ended()); n != 0 {
		t.Errorf("%d spans from the audit-only stage", n)
	}
}

// By default the gates' times are not recorded: no axag.gate.duration, and
// the chain reads no clock per stage (TimesStages is false), while the span
// still lists the gates passed and the refusal, and the call's own metrics
// are there.
func TestTelemetryGateDurationsOff(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	if r.tel.TimesStages() {
		t.Error("TimesStages = true without GateDurations")
	}
	call := middleware.NewCall("order_place", json.RawMessage(`{}`), middleware.Principal{})
	if err := r.run(t, call, okTool, passStage("access"), refuseStage("params", axerr.New(axerr.CodeMissingParam, "missing"))); err == nil {
		t.Fatal("allowed")
	}
	s := oneSpan(t, r)
	var passed []string
	for _, ev := range s.Events() {
		for _, kv := range ev.Attributes {
			if ev.Name == "axag.gates" && kv.Key == "axag.gates.passed" {
				passed = kv.Value.AsStringSlice()
			}
		}
	}
	if !slices.Equal(passed, []string{"intent", "access"}) {
		t.Errorf("axag.gates.passed = %v; want [intent access]", passed)
	}
	if got := gateEvents(s); !slices.Equal(got, []string{"params:deny:AXAG_MISSING_PARAM"}) {
		t.Errorf("refusal events = %v", got)
	}
	ms := collect(t, r)
	if m, ok := ms["axag.gate.duration"]; ok {
		t.Errorf("axag.gate.duration exported without GateDurations: %+v", m)
	}
	if got := counterPoints(t, ms["axag.decisions"]); got["axag.decision=deny,axag.error.code=AXAG_MISSING_PARAM,axag.intent=order.place"] != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
	if got := histogramCounts(t, ms["axag.call.duration"]); len(got) != 1 {
		t.Errorf("axag.call.duration = %v", got)
	}
	on := newTelemetryRig(t, middleware.TelemetryConfig{GateDurations: true}, true)
	if !on.tel.TimesStages() {
		t.Error("TimesStages = false with GateDurations")
	}
}
