package axgate

import (
	"fmt"
	"log/slog"

	"github.com/axgate/axgate/middleware"
)

// observeConfig configures tracing, metrics and the audit log.
type observeConfig struct {
	telemetry middleware.TelemetryConfig
	logger    *slog.Logger
}

// WithTelemetry configures tracing, metrics, the audit sink, argument recording and span events.
//
// Each field and its default are documented on middleware.TelemetryConfig
// (providers: the global ones; no audit sink; argument values never
// recorded; one summary event of the gates passed, plus the refusal's). The audit log of WithLogger is written
// besides the Audit sink (middleware.MultiAudit joins several sinks). A
// later WithTelemetry replaces an earlier one.
func WithTelemetry(t middleware.TelemetryConfig) Option {
	return func(c *config) { c.observe.telemetry = t }
}

// WithLogger writes the audit log to logger: one record per decision.
//
// A record has the message "axgate decision" (Info when allowed, Warn when
// refused) and the intent, tool, principal, tenant, risk level, decision,
// code, gate, parameter names (never values), confirmation and approval
// facts, declared side effects, and the trace and span ids.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.observe.logger = logger }
}

// observeStages returns the stage that traces, measures and audits each
// call, and keeps the telemetry on the enforcer as the chain's observer. It
// wraps the whole chain. When tracing and metrics are both turned off
// (no-op providers) and no audit log is configured there is none, and the
// chain runs without an observer.
//
// Tracing and metrics from the global providers while no provider is
// installed (OpenTelemetry's default delegates) record nothing: such calls
// take quiet chains (quietStages) without the observe stage and without
// the Observer, which would otherwise read the clock at every gate and
// start a span nobody keeps. Whether the global providers record is asked
// on every call (middleware.Telemetry.Recording), so a provider installed
// with otel.SetTracerProvider or otel.SetMeterProvider after New is
// honoured from the next call on.
func (e *Enforcer) observeStages() ([]middleware.Stage, error) {
	tc := e.cfg.observe.telemetry
	tc.Audit = middleware.MultiAudit(middleware.SlogAudit(e.cfg.observe.logger), tc.Audit)
	t, err := middleware.NewTelemetry(e.m, tc)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if !t.Enabled() {
		return nil, nil
	}
	e.telemetry = t
	return []middleware.Stage{t.Stage()}, nil
}

// quietStages returns stages without the observe stage, or with the
// audit-only stage in its place when an audit sink is set: the chain a call
// takes while tracing and metrics record nothing. Audit records are
// written either way.
func (e *Enforcer) quietStages(stages []middleware.Stage) []middleware.Stage {
	out := make([]middleware.Stage, 0, len(stages))
	for i, s := range stages {
		if i == 0 && s.Name == middleware.StageObserve {
			if e.telemetry.Auditing() {
				out = append(out, e.telemetry.AuditStage())
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// observer returns the observer that hears every stage's outcome, or nil
// when nothing observes the chain.
func (e *Enforcer) observer() middleware.Observer {
	if e.telemetry == nil {
		return nil
	}
	return e.telemetry
}
