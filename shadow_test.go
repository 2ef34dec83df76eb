package axgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// countingReplay is a replay store that counts the ids it was asked to
// record.
type countingReplay struct {
	token.ReplayStore
	consumed atomic.Int32
}

func (r *countingReplay) Consume(ctx context.Context, uses []token.Use) error {
	r.consumed.Add(int32(len(uses)))
	return r.ReplayStore.Consume(ctx, uses)
}

// countingApprovals is an approval store that counts the requests created.
type countingApprovals struct {
	gates.ApprovalStore
	created atomic.Int32
}

func (s *countingApprovals) Create(ctx context.Context, req gates.ApprovalRequest, quota int) (gates.ApprovalRequest, bool, error) {
	s.created.Add(1)
	return s.ApprovalStore.Create(ctx, req, quota)
}

type shadowRig struct {
	e        *axgate.Enforcer
	tool     *spy
	inv      middleware.Invoker
	log      bytes.Buffer
	spans    *tracetest.SpanRecorder
	reader   *sdkmetric.ManualReader
	replay   *countingReplay
	requests *countingApprovals
	notified atomic.Int32
}

func newShadowRig(t *testing.T, o axgate.ShadowOptions) *shadowRig {
	t.Helper()
	r := &shadowRig{tool: &spy{}, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.replay = &countingReplay{ReplayStore: token.NewMemoryReplayStore(token.MemoryReplayOptions{})}
	r.requests = &countingApprovals{ApprovalStore: gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})}
	o.Logger = slog.New(slog.NewJSONHandler(&r.log, nil))
	r.e = tokEnforcer(t,
		axgate.WithShadow(o),
		axgate.WithLogger(o.Logger),
		axgate.WithReplayStore(r.replay),
		axgate.WithApprovalStore(r.requests),
		axgate.WithApprovals(axgate.ApprovalOptions{Notifier: gate.NotifierFunc(func(context.Context, gates.ApprovalRequest) error {
			r.notified.Add(1)
			return nil
		})}),
		axgate.WithTelemetry(middleware.TelemetryConfig{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans)),
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader)),
		}))
	r.inv = r.e.Wrap(r.tool)
	return r
}

// shadowLines are the log records of the refusals shadow mode let pass.
func (r *shadowRig) shadowLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == axgate.ShadowMessage {
			out = append(out, m)
		}
	}
	return out
}

func (r *shadowRig) decisions(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "axag.decisions" {
				for _, dp := range sum.DataPoints {
					d, _ := dp.Attributes.Value("axag.decision")
					c, _ := dp.Attributes.Value("axag.error.code")
					out[d.AsString()+"/"+c.AsString()] += dp.Value
				}
			}
		}
	}
	return out
}

// In shadow mode the tool runs although the call lacks its confirmation and
// its arguments are wrong; the log, the span, the audit and the metric say
// what would have refused it; no person is asked.
func TestShadowLetsRefusalsPass(t *testing.T) {
	r := newShadowRig(t, axgate.ShadowOptions{Intents: []string{"order.refund"}})
	call := tokCall("order_refund", `{"order_id":"o-1","amount":"lots"}`, tokAlice)
	call.Elicit = func(context.Context, string) (bool, error) {
		t.Error("shadow mode asked the person to confirm")
		return false, nil
	}
	if _, err := r.inv.Invoke(t.Context(), call); err != nil {
		t.Fatalf("shadowed call refused: %v", err)
	}
	if r.tool.calls.Load() != 1 {
		t.Fatalf("tool ran %d times; want 1", r.tool.calls.Load())
	}
	var got []string
	for _, e := range call.Facts.ShadowRefusals {
		got = append(got, e.Gate+":"+string(e.Code))
	}
	want := []string{"params:AXAG_INVALID_TYPE", "confirmation:AXAG_CONFIRMATION_MISSING"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("shadow refusals = %v; want %v", got, want)
	}
	lines := r.shadowLines(t)
	if len(lines) != 2 || lines[0]["code"] != "AXAG_INVALID_TYPE" || lines[0]["gate"] != "params" ||
		lines[1]["code"] != "AXAG_CONFIRMATION_MISSING" || lines[0]["intent"] != "order.refund" ||
		lines[0]["principal"] != "alice" || lines[0]["decision"] != "shadow_deny" || lines[0]["level"] != "WARN" {
		t.Errorf("shadow log = %v", lines)
	}
	var audit map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == middleware.AuditMessage {
			audit = m
		}
	}
	if audit["decision"] != "shadow_deny" || audit["code"] != "AXAG_INVALID_TYPE" || audit["gate"] != "params" || audit["level"] != "WARN" {
		t.Errorf("audit record = %v; want decision shadow_deny", audit)
	}
	if strings.Contains(r.log.String(), "lots") {
		t.Errorf("shadow log holds an argument value: %s", r.log.String())
	}
	ended := r.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans", len(ended))
	}
	a := attrs(ended[0].Attributes())
	if a["axag.decision"] != "shadow_deny" || a["axag.error.code"] != "AXAG_INVALID_TYPE" || a["axag.gate"] != "params" {
		t.Errorf("span attributes = %v", a)
	}
	if ev := events(ended[0]); !strings.Contains(strings.Join(ev, " "), "confirmation:shadow_deny:AXAG_CONFIRMATION_MISSING") {
		t.Errorf("span events = %v; want each would-be refusal", ev)
	}
	if got := r.decisions(t); got["shadow_deny/AXAG_INVALID_TYPE"] != 1 || len(got) != 1 {
		t.Errorf("axag.decisions = %v", got)
	}
}

// A confirmation token presented in shadow mode is checked but never spent:
// the replay store records nothing, and the same token still counts.
func TestShadowSpendsNoToken(t *testing.T) {
	r := newShadowRig(t, axgate.ShadowOptions{Intents: []string{"order.refund"}})
	const args = `{"order_id":"o-1","amount":25}`
	tok, _, err := r.e.IssueConfirmation(t.Context(), tokAlice, "order_refund", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		call := tokCall("order_refund", args, tokAlice)
		call.Credentials.Confirmation = tok
		if _, err := r.inv.Invoke(t.Context(), call); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(call.Facts.ShadowRefusals) != 0 || call.Facts.ConfirmationJTI == "" {
			t.Errorf("call %d: shadow refusals %v, confirmation %q; want the token accepted", i, call.Facts.ShadowRefusals, call.Facts.ConfirmationJTI)
		}
	}
	if n := r.replay.consumed.Load(); n != 0 {
		t.Errorf("replay store recorded %d ids in shadow mode; want none", n)
	}
	c := tokCall("order_refund", args, tokAlice)
	c.Credentials.Confirmation = tok
	if err := r.e.Check(t.Context(), c); err != nil {
		t.Errorf("the token is no longer accepted after shadow calls: %v", err)
	}
	if lines := r.shadowLines(t); len(lines) != 0 {
		t.Errorf("shadow log = %v; want nothing for calls that would pass", lines)
	}
}

// An approval_required call in shadow mode opens no approval request and
// notifies no one.
func TestShadowOpensNoApprovalRequest(t *testing.T) {
	r := newShadowRig(t, axgate.ShadowOptions{Intents: []string{"payout.send"}})
	call := tokCall("payout_send", `{"amount":10}`, tokAlice)
	if _, err := r.inv.Invoke(t.Context(), call); err != nil {
		t.Fatalf("shadowed call refused: %v", err)
	}
	if len(call.Facts.ShadowRefusals) != 1 || call.Facts.ShadowRefusals[0].Code != axerr.CodeApprovalMissing {
		t.Errorf("shadow refusals = %v; want AXAG_APPROVAL_MISSING", call.Facts.ShadowRefusals)
	}
	if n := r.requests.created.Load(); n != 0 {
		t.Errorf("%d approval requests created in shadow mode", n)
	}
	if n := r.notified.Load(); n != 0 {
		t.Errorf("%d notifications in shadow mode", n)
	}
}

// Shadow mode does not protect the process from what is not a value, nor
// answer for actions left out of it, nor Check.
func TestShadowStillRefuses(t *testing.T) {
	r := newShadowRig(t, axgate.ShadowOptions{Intents: []string{"order.refund"}})
	cases := []struct {
		name, tool, args string
		code             axerr.Code
	}{
		{"duplicate keys", "order_refund", `{"order_id":"o-1","order_id":"o-2","amount":1}`, axerr.CodeInvalidArguments},
		{"not JSON", "order_refund", `{"order_id":`, axerr.CodeInvalidArguments},
		{"unknown tool", "order_delete", `{}`, axerr.CodeIntentNotFound},
		{"action not in shadow", "payout_send", `{"amount":10}`, axerr.CodeApprovalMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.inv.Invoke(t.Context(), tokCall(tc.tool, tc.args, tokAlice))
			if e, ok := axerr.As(err); !ok || e.Code != tc.code {
				t.Fatalf("err = %v; want %s", err, tc.code)
			}
		})
	}
	if n := r.tool.calls.Load(); n != 0 {
		t.Errorf("tool ran %d times", n)
	}
	if err := r.e.Check(t.Context(), tokCall("order_refund", `{"order_id":"o-1","amount":1}`, tokAlice)); err == nil {
		t.Error("Check allowed a call that lacks its confirmation: Check must report what enforcement decides")
	}
}

// Shadow mode is refused for critical actions unless forced, and for
// intents the manifest does not declare.
func TestShadowRefusedAtNew(t *testing.T) {
	m := tokManifestParsed(t)
	for _, tc := range []struct {
		name string
		o    axgate.ShadowOptions
		want string
	}{
		{"whole enforcer", axgate.ShadowOptions{}, "vault.open"},
		{"critical intent", axgate.ShadowOptions{Intents: []string{"vault.open"}}, "Force"},
		{"unknown intent", axgate.ShadowOptions{Intents: []string{"order.refnud"}}, "order.refnud"},
		{"forced intent not shadowed", axgate.ShadowOptions{Intents: []string{"order.refund"}, ForceIntents: []string{"vault.open"}}, "vault.open"},
		{"whole enforcer, critical not forced", axgate.ShadowOptions{ForceIntents: []string{"order.refund"}}, "vault.open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := axgate.New(m, axgate.WithShadow(tc.o))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want an error naming %q", err, tc.want)
			}
		})
	}
	e, err := axgate.New(m, axgate.WithShadow(axgate.ShadowOptions{Intents: []string{"vault.open"}, Force: true}))
	if err != nil {
		t.Fatalf("forced shadow of a critical action: %v", err)
	}
	e.Close()
	e, err = axgate.New(m, axgate.WithShadow(axgate.ShadowOptions{ForceIntents: []string{"vault.open"}}))
	if err != nil {
		t.Fatalf("shadow of every action, the critical one forced by intent: %v", err)
	}
	e.Close()
}

func tokManifestParsed(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(tokManifest))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The snippet of docs/shadow.md: order.refund runs without its
// confirmation, and the refusal is recorded.
func TestREADMEShadowMode(t *testing.T) {
	m := tokManifestParsed(t)
	e, err := axgate.New(m, axgate.WithShadow(axgate.ShadowOptions{
		Intents: []string{"order.refund"}, // empty: every action
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tool := &spy{}
	call := tokCall("order_refund", `{"order_id":"o-1","amount":25}`, tokAlice)
	if _, err := e.Wrap(tool).Invoke(t.Context(), call); err != nil || tool.calls.Load() != 1 {
		t.Fatalf("err %v, tool ran %d times", err, tool.calls.Load())
	}
	if len(call.Facts.ShadowRefusals) != 1 || call.Facts.ShadowRefusals[0].Code != axerr.CodeConfirmationMissing {
		t.Errorf("shadow refusals = %v", call.Facts.ShadowRefusals)
	}
}
