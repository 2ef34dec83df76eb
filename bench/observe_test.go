package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// readManifest has one read action, which every standard gate lets through.
const readManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search the product catalogue",
     "required_parameters": [{"name": "query", "type": "string", "description": "Search query text"}],
     "optional_parameters": [
       {"name": "category", "type": "string", "description": "Category filter", "enum": ["electronics", "clothing", "books", "home"]},
       {"name": "limit", "type": "number", "description": "Results per page", "min": 1, "max": 100}],
     "risk_level": "none", "idempotent": true, "scope": "global"}
  ]
}`

var searchArgs = json.RawMessage(`{"query":"red running shoes","category":"clothing","limit":20}`)

// discardExporter is a span exporter that drops every span: the cost
// measured is axgate's and the SDK's, not an exporter's.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// cpuClock measures the CPU time the whole process spends (every thread:
// the benchmark, the span exporter's goroutine, the garbage collector). On a
// shared machine wall time per op mostly measures the neighbours; CPU time
// per op does not.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

// report adds cpu-ns/op to the benchmark's results.
func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// telemetryOff turns tracing and metrics off (no-op providers), so that a
// chain has no observe stage.
func telemetryOff() axgate.Option {
	return axgate.WithTelemetry(middleware.TelemetryConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
}

// BenchmarkObserve is the read action's chain on an allowed call (intent,
// access, params and commit: the gates with something to check for a plain
// read; the others are left out of its chain), with telemetry:
//
//   - off: no-op tracer and meter providers, so no observe stage at all;
//   - global: the defaults, the global providers with nothing installed
//     (no observe stage: the calls take the quiet chains);
//   - global,before: the same providers given explicitly, which keeps the
//     observe stage in the chain: what global cost before;
//   - on: SDK tracer (always sampled, batched to an exporter that drops
//     spans) and SDK meter (manual reader), summary gate events (the
//     default; no axag.gate.duration, the default);
//   - on,gate-durations: as on, with axag.gate.duration
//     (TelemetryConfig.GateDurations), the default before it was opt-in;
//   - on,all-events: as on, with every gate's event (GateEventsAll);
//   - on,refusal-events: as on, with span events for refusals only
//     (TelemetryConfig.GateEvents: middleware.GateEventsRefusals);
//   - on,summary-events: as on, with one event listing the gates passed
//     (TelemetryConfig.GateEvents: middleware.GateEventsSummary);
//   - lean: refusal events only, and a view that drops axag.gate.duration:
//     one span and two metric points per call;
//   - on+audit: as on, plus the slog audit log (JSON to io.Discard).
//
// The difference between off and on is what tracing and metrics add per call;
// floor (below) is the least an instrumentation of the same spans and points
// could cost.
func BenchmarkObserve(b *testing.B) {
	m, err := manifest.Parse([]byte(readManifest))
	if err != nil {
		b.Fatal(err)
	}
	// sdk returns the SDK providers' telemetry with the given gate events;
	// sdkWith with the given configuration.
	var sdkWith func(tc middleware.TelemetryConfig, views ...sdkmetric.View) []axgate.Option
	sdk := func(events middleware.GateEvents, views ...sdkmetric.View) []axgate.Option {
		return sdkWith(middleware.TelemetryConfig{GateEvents: events}, views...)
	}
	sdkWith = func(tc middleware.TelemetryConfig, views ...sdkmetric.View) []axgate.Option {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()), sdkmetric.WithView(views...))
		tc.TracerProvider, tc.MeterProvider = tp, mp
		return []axgate.Option{axgate.WithTelemetry(tc)}
	}
	dropGates := sdkmetric.NewView(sdkmetric.Instrument{Name: "axag.gate.duration"}, sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})
	modes := []struct {
		name string
		opts func() []axgate.Option
	}{
		{"off", func() []axgate.Option {
			return []axgate.Option{telemetryOff()}
		}},
		{"global", func() []axgate.Option { return nil }},
		{"global,before", func() []axgate.Option {
			// The default global providers given explicitly: the enforcer
			// cannot tell they record nothing, and keeps the observe stage
			// and its Observer in the chain, as every enforcer did before
			// the quiet chains.
			return []axgate.Option{axgate.WithTelemetry(middleware.TelemetryConfig{
				TracerProvider: otel.GetTracerProvider(), MeterProvider: otel.GetMeterProvider()})}
		}},
		{"on", func() []axgate.Option { return sdk(middleware.GateEventsSummary) }},
		{"on,gate-durations", func() []axgate.Option {
			return sdkWith(middleware.TelemetryConfig{GateDurations: true})
		}},
		{"on,all-events", func() []axgate.Option { return sdk(middleware.GateEventsAll) }},
		{"on,refusal-events", func() []axgate.Option {
			return sdk(middleware.GateEventsRefusals)
		}},
		{"on,summary-events", func() []axgate.Option {
			return sdk(middleware.GateEventsSummary)
		}},
		{"lean", func() []axgate.Option {
			return sdk(middleware.GateEventsRefusals, dropGates)
		}},
		{"on+audit", func() []axgate.Option {
			return append(sdk(middleware.GateEventsSummary), axgate.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
		}},
	}
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	})
	p := middleware.Principal{ID: "u1", Tenant: "t1", Roles: []string{"customer"}}
	bench := func(b *testing.B, inv middleware.Invoker) {
		ctx := context.Background()
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, err := inv.Invoke(ctx, middleware.NewCall("product_search", searchArgs, p)); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	}
	for _, mode := range modes {
		b.Run("telemetry="+mode.name, func(b *testing.B) {
			e, err := axgate.New(m, mode.opts()...)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			bench(b, e.Wrap(tool))
		})
	}
	// floor: the off chain inside the least any OpenTelemetry instrumentation
	// with these attributes costs: one span started with six attributes, one
	// set at the end, and two metric points, all prepared ahead. What lean
	// adds beyond floor is axgate's own overhead.
	b.Run("telemetry=floor", func(b *testing.B) {
		e, err := axgate.New(m, modes[0].opts()...)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		inner := e.Wrap(tool)
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		defer tp.Shutdown(context.Background())
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		tracer, meter := tp.Tracer("floor"), mp.Meter("floor")
		counter, _ := meter.Int64Counter("decisions")
		hist, _ := meter.Float64Histogram("duration")
		start := []trace.SpanStartOption{trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "product_search"),
			attribute.String("axag.intent", "product.search"), attribute.String("axag.action_type", "read"),
			attribute.String("axag.risk_level", "none"), attribute.String("x", "y"))}
		allow := []attribute.KeyValue{attribute.String("axag.decision", "allow")}
		set := metric.WithAttributeSet(attribute.NewSet(attribute.String("axag.intent", "product.search"), attribute.String("axag.decision", "allow")))
		add, rec := []metric.AddOption{set}, []metric.RecordOption{set}
		bench(b, middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
			t0 := time.Now()
			ctx, span := tracer.Start(ctx, "execute_tool product_search", start...)
			res, err := inner.Invoke(ctx, call)
			span.SetAttributes(allow...)
			span.End()
			counter.Add(ctx, 1, add...)
			hist.Record(ctx, time.Since(t0).Seconds(), rec...)
			return res, err
		}))
	})
}

// BenchmarkObserveParts prices, with the SDK alone and no chain, the pieces
// that tracing and metrics add to the read chain of BenchmarkObserve, so that
// the difference between its modes can be told apart:
//
//   - span: one span started with the six attributes of an execute_tool
//     span, the decision set, ended (the SDK configured as in on);
//   - span+events: the same span with the four axag.gate pass events of the
//     read chain (prepared options, as the Telemetry stage does);
//   - span+11events: the same with the eleven of an action that every gate
//     of the standard chain checks;
//   - gate-points: four axag.gate.duration points, one per gate;
//   - clock: the six clock reads an observed read chain makes per call
//     (one per stage boundary and one at the end).
func BenchmarkObserveParts(b *testing.B) {
	gates := []string{"intent", "access", "params", "constraints", "preconditions", "rate_limit",
		"confirmation", "approval", "idempotency", "commit", "postconditions"}
	readGates := []string{"intent", "access", "params", "commit"}
	newTracer := func(b *testing.B) trace.Tracer {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp.Tracer("parts")
	}
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "product_search"),
		attribute.String("axag.intent", "product.search"), attribute.String("axag.action_type", "read"),
		attribute.String("axag.risk_level", "none"))}
	allow := []attribute.KeyValue{attribute.String("axag.decision", "allow")}
	events := make([][]trace.EventOption, len(gates))
	points := make([][]metric.RecordOption, len(gates))
	for i, g := range gates {
		events[i] = []trace.EventOption{trace.WithAttributes(attribute.String("axag.gate", g), attribute.String("axag.gate.outcome", "pass"))}
		points[i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("axag.gate", g)))}
	}
	span := func(b *testing.B, nEvents int) {
		tracer := newTracer(b)
		ctx := context.Background()
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			_, s := tracer.Start(ctx, "execute_tool product_search", start...)
			for i := range nEvents {
				s.AddEvent("axag.gate", events[i]...)
			}
			s.SetAttributes(allow...)
			s.End()
		}
		cpu.report(b)
	}
	b.Run("part=span", func(b *testing.B) { span(b, 0) })
	b.Run("part=span+events", func(b *testing.B) { span(b, len(readGates)) })
	b.Run("part=span+11events", func(b *testing.B) { span(b, len(gates)) })
	b.Run("part=gate-points", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		h, err := mp.Meter("parts").Float64Histogram("axag.gate.duration", metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(0.000_001, 0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
				0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			for i := range readGates {
				h.Record(ctx, 0.000_002, points[i]...)
			}
		}
		cpu.report(b)
	})
	b.Run("part=clock", func(b *testing.B) {
		var last time.Time
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			for range len(readGates) + 2 {
				last = time.Now()
			}
		}
		cpu.report(b)
		_ = last
	})
}

// BenchmarkObserveSDKMinimum is the least any OpenTelemetry SDK
// instrumentation of a call costs: the off chain of BenchmarkObserve inside
// one span with a single attribute and one counter point, nothing of
// axgate's, with the SDK's span processor
//
//   - none: no processor at all (spans are made and dropped, never exported);
//   - syncer: an exporter that drops spans, called on End;
//   - batcher: the same exporter behind the batch processor, as in Observe.
//
// "off" is the bare chain, in the same run.
func BenchmarkObserveSDKMinimum(b *testing.B) {
	m, err := manifest.Parse([]byte(readManifest))
	if err != nil {
		b.Fatal(err)
	}
	e, err := axgate.New(m, telemetryOff())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	inner := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}))
	p := middleware.Principal{ID: "u1", Tenant: "t1", Roles: []string{"customer"}}
	for _, mode := range []struct {
		name string
		opts []sdktrace.TracerProviderOption
	}{
		{"off", nil},
		{"none", nil},
		{"syncer", []sdktrace.TracerProviderOption{sdktrace.WithSyncer(discardExporter{})}},
		{"batcher", []sdktrace.TracerProviderOption{sdktrace.WithBatcher(discardExporter{})}},
	} {
		b.Run("processor="+mode.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(append(mode.opts, sdktrace.WithSampler(sdktrace.AlwaysSample()))...)
			defer tp.Shutdown(context.Background())
			tracer := tp.Tracer("minimum")
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			counter, err := mp.Meter("minimum").Int64Counter("decisions")
			if err != nil {
				b.Fatal(err)
			}
			start := []trace.SpanStartOption{trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"))}
			add := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("axag.intent", "product.search")))}
			ctx := context.Background()
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				call := middleware.NewCall("product_search", searchArgs, p)
				if mode.name == "off" {
					if _, err := inner.Invoke(ctx, call); err != nil {
						b.Fatal(err)
					}
					continue
				}
				sctx, span := tracer.Start(ctx, "execute_tool product_search", start...)
				_, err := inner.Invoke(sctx, call)
				span.End()
				counter.Add(ctx, 1, add...)
				if err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}
