package axgate

import (
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate/middleware"
)

// observeConfig configures tracing, metrics and the audit log.
type observeConfig struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	logger         *slog.Logger
	sinks          []middleware.AuditSink
	redact         middleware.Redactor
	gateEvents     middleware.GateEvents

	// telemetry is built by observeStages and observes the chain.
	telemetry *middleware.Telemetry
}

func defaultObserveConfig() observeConfig { return observeConfig{} }

// WithTracerProvider makes the spans of every call with tp. The default is
// the global provider (otel.GetTracerProvider), including one installed after
// New. A provider from go.opentelemetry.io/otel/trace/noop turns tracing off.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.observe.tracerProvider = tp }
}

// WithMeterProvider records the metrics axag.decisions, axag.call.duration
// and axag.gate.duration with mp. The default is the global provider
// (otel.GetMeterProvider). A provider from
// go.opentelemetry.io/otel/metric/noop turns metrics off.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.observe.meterProvider = mp }
}

// WithLogger writes the audit log to logger: one record per decision
// (message "axgate decision"; Info when allowed, Warn when refused), with the
// intent, tool, principal, tenant, risk level, decision, code, gate,
// parameter names (never values), confirmation and approval facts, declared
// side effects, and the trace and span ids.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.observe.logger = logger }
}

// WithAuditSink hands every audit record to sink as well (a database, a
// queue). It can be given several times; every sink gets every record.
func WithAuditSink(sink middleware.AuditSink) Option {
	return func(c *config) {
		if sink != nil {
			c.observe.sinks = append(c.observe.sinks, sink)
		}
	}
}

// WithArgumentRecording records the arguments of each call on its span
// (gen_ai.tool.call.arguments) and in its audit record, as redact returns
// them (for example middleware.RedactExcept("query")). Without this option
// argument values are never recorded, only their names.
func WithArgumentRecording(redact middleware.Redactor) Option {
	return func(c *config) { c.observe.redact = redact }
}

// WithGateEvents says which gates' outcomes become events of a call's span:
// every gate's (middleware.GateEventsAll, the default), only the refusal
// (middleware.GateEventsRefusals), which roughly halves what tracing adds to
// an allowed call on the standard chain, or one event listing the gates
// passed plus the refusal (middleware.GateEventsSummary), at about the cost
// of refusals only. Gate times are in the axag.gate.duration histogram
// either way.
func WithGateEvents(which middleware.GateEvents) Option {
	return func(c *config) { c.observe.gateEvents = which }
}

// observeStages returns the stage that traces, measures and audits each call.
// It wraps the whole chain. When tracing and metrics are both turned off
// (no-op providers) and no audit log is configured there is none, and the
// chain runs without an observer.
func (e *Enforcer) observeStages() ([]middleware.Stage, error) {
	oc := &e.cfg.observe
	t, err := middleware.NewTelemetry(e.m, middleware.TelemetryConfig{
		TracerProvider:  oc.tracerProvider,
		MeterProvider:   oc.meterProvider,
		Audit:           middleware.MultiAudit(append([]middleware.AuditSink{middleware.SlogAudit(oc.logger)}, oc.sinks...)...),
		RecordArguments: oc.redact,
		GateEvents:      oc.gateEvents,
	})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if !t.Enabled() {
		return nil, nil
	}
	oc.telemetry = t
	return []middleware.Stage{t.Stage()}, nil
}

// observer returns the observer that hears every stage's outcome, or nil
// when nothing observes the chain.
func (e *Enforcer) observer() middleware.Observer {
	if e.cfg.observe.telemetry == nil {
		return nil
	}
	return e.cfg.observe.telemetry
}
