package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/axgate/axgate/middleware"
)

// telemetry is the OpenTelemetry SDK of the process: a tracer provider when
// traces are exported, a meter provider when metrics are exported or
// scraped. It is handed to the enforcers explicitly, never installed as
// the global providers.
type telemetry struct {
	tp       *sdktrace.TracerProvider // nil: no traces
	mp       *sdkmetric.MeterProvider // nil: no metrics
	registry *prometheus.Registry     // nil without the admin server
}

// otlpWanted says whether the standard variables ask for an exporter of a
// signal (traces, metrics or logs): its OTEL_<SIGNAL>_EXPORTER is set to
// something other than none, or an OTLP endpoint is. Without any of them
// the SDK exports nothing: autoexport alone would send to localhost:4318.
func otlpWanted(signal string) bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if v := os.Getenv("OTEL_" + signal + "_EXPORTER"); v != "" {
		return v != "none"
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// otelResource describes the process: service.name axgate unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
func otelResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "axgate")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
}

// newTelemetry installs the SDK the environment asks for (the standard
// OTEL_* variables, through autoexport: OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER, OTEL_EXPORTER_OTLP_PROTOCOL, …) and, with
// prometheus, a Prometheus registry the admin server's /metrics serves.
func newTelemetry(ctx context.Context, withPrometheus bool) (*telemetry, error) {
	t := &telemetry{}
	res, err := otelResource(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	if otlpWanted("TRACES") {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("OpenTelemetry traces: %w", err)
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		}
	}
	var readers []sdkmetric.Option
	if otlpWanted("METRICS") {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			_ = t.shutdown(ctx)
			return nil, fmt.Errorf("OpenTelemetry metrics: %w", err)
		}
		if !autoexport.IsNoneMetricReader(r) {
			readers = append(readers, sdkmetric.WithReader(r))
		}
	}
	if withPrometheus {
		t.registry = prometheus.NewRegistry()
		t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := promexporter.New(promexporter.WithRegisterer(t.registry))
		if err != nil {
			_ = t.shutdown(ctx)
			return nil, fmt.Errorf("Prometheus exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exp))
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
	}
	return t, nil
}

// config returns the telemetry configuration of the enforcers, and false
// when there is no SDK (the enforcers then keep their defaults, and with
// them no observe stage).
func (t *telemetry) config() (middleware.TelemetryConfig, bool) {
	// The servers export each gate's time (axag_gate_duration_seconds on
	// /metrics), which the library records only when asked.
	tc := middleware.TelemetryConfig{GateDurations: true}
	if t.tp != nil {
		tc.TracerProvider = t.tp
	}
	if t.mp != nil {
		tc.MeterProvider = t.mp
	}
	return tc, t.tp != nil || t.mp != nil
}

// shutdown exports what is left and stops the providers.
func (t *telemetry) shutdown(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
