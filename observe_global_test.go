package axgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// globalChild names the test a subprocess of TestObserveGlobalProviders
// runs: the global providers are process-wide, and once set they cannot be
// unset, so the test that sets them runs alone in its own process.
const globalChild = "AXGATE_TEST_GLOBAL_PROVIDERS"

// With no provider installed (OpenTelemetry's default global delegates),
// calls take the chain without the observe stage and its Observer, but the
// audit log is still written; a tracer and meter provider installed with
// otel.SetTracerProvider / otel.SetMeterProvider after New are honoured from
// the next call on.
func TestObserveGlobalProviders(t *testing.T) {
	if os.Getenv(globalChild) == "1" {
		globalProvidersChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestObserveGlobalProviders$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), globalChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestObserveGlobalProviders") {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

// readAllocs is the allocations of one allowed read call through e.
func readAllocs(t *testing.T, e *axgate.Enforcer) float64 {
	t.Helper()
	tool := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}))
	args := json.RawMessage(`{"query":"lamp"}`)
	return testing.AllocsPerRun(200, func() {
		c := middleware.NewCall("product_search", args, middleware.Principal{ID: "u1"})
		if _, err := tool.Invoke(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	})
}

func globalProvidersChild(t *testing.T) {
	m, err := manifest.Parse([]byte(observeManifest))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	e, err := axgate.New(m, axgate.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tool := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}))
	call := func() {
		t.Helper()
		c := middleware.NewCall("product_search", json.RawMessage(`{"query":"lamp"}`), middleware.Principal{ID: "u1"})
		if _, err := tool.Invoke(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	// No provider installed: a call costs what it costs with tracing and
	// metrics turned off (no-op providers), so the observe stage and its
	// Observer are out of its chain.
	off, err := axgate.New(m, axgate.WithTelemetry(middleware.TelemetryConfig{
		TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	global, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer global.Close()
	if a, b := readAllocs(t, off), readAllocs(t, global); a != b {
		t.Errorf("allocations per call: %v with no-op providers, %v with the default global ones; want the same", a, b)
	}

	// No provider installed: the audit record is written, with no trace.
	call()
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &rec); err != nil {
		t.Fatalf("audit log %q: %v", log.String(), err)
	}
	if rec["msg"] != middleware.AuditMessage || rec["decision"] != "allow" || rec["intent"] != "product.search" {
		t.Errorf("audit record without a provider = %v", rec)
	}
	if _, ok := rec["trace_id"]; ok {
		t.Errorf("audit record has a trace id without a tracer provider: %v", rec)
	}

	// Installed after New: the next call is traced and counted.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	log.Reset()
	call()
	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Name() != "execute_tool product_search" {
		t.Fatalf("spans after otel.SetTracerProvider = %d; want the second call's", len(ended))
	}
	if got := events(ended[0]); len(got) == 0 || got[0] != "intent:pass" {
		t.Errorf("events = %v; want the gates the call passed (the Observer runs again)", got)
	}
	if !strings.Contains(log.String(), ended[0].SpanContext().TraceID().String()) {
		t.Errorf("audit record %q lacks the span's trace id", log.String())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			if sum, ok := mm.Data.(metricdata.Sum[int64]); ok && mm.Name == "axag.decisions" {
				for _, dp := range sum.DataPoints {
					calls += dp.Value
				}
			}
		}
	}
	if calls != 1 {
		t.Errorf("axag.decisions = %d after otel.SetMeterProvider; want 1 (the second call)", calls)
	}
}
