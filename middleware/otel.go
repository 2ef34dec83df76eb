package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
)

// StageObserve is the name of the telemetry stage, which wraps the whole
// chain.
const StageObserve = "observe"

// instrumentationName is the OpenTelemetry instrumentation scope of axgate's
// tracer and meter.
const instrumentationName = "github.com/axgate/axgate"

// Decisions as recorded in axag.decision.
const (
	// DecisionAllow: every gate let the call through (the tool may still
	// have failed; then axag.error.code says so and axag.gate is "tool").
	DecisionAllow = "allow"
	// DecisionDeny: a stage of the chain refused the call.
	DecisionDeny = "deny"
	// DecisionShadowDeny: a gate in shadow mode would have refused the
	// call, and let it run (Facts.ShadowRefusals); axag.error.code and
	// axag.gate are the first such refusal's.
	DecisionShadowDeny = "shadow_deny"
)

// Attribute keys. The gen_ai.* keys follow the OpenTelemetry GenAI semantic
// conventions for execute_tool spans; the axag.* keys are axgate's own.
const (
	keyOperationName = attribute.Key("gen_ai.operation.name")
	keyToolName      = attribute.Key("gen_ai.tool.name")
	keyToolCallID    = attribute.Key("gen_ai.tool.call.id")
	keyToolArguments = attribute.Key("gen_ai.tool.call.arguments")
	keyErrorType     = attribute.Key("error.type")

	keyIntent     = attribute.Key("axag.intent")
	keyActionType = attribute.Key("axag.action_type")
	keyRiskLevel  = attribute.Key("axag.risk_level")
	keyDecision   = attribute.Key("axag.decision")
	keyCode       = attribute.Key("axag.error.code")
	keyGate       = attribute.Key("axag.gate")
	keyOutcome    = attribute.Key("axag.gate.outcome")
	keyPaths      = attribute.Key("axag.error.paths")
	keyPassed     = attribute.Key("axag.gates.passed")
	keyCheckOnly  = attribute.Key("axag.check_only")
	keyReplayed   = attribute.Key("axag.replayed")
)

const (
	operationExecuteTool = "execute_tool"
	// gateTool is the gate a tool failure is attributed to.
	gateTool = "tool"
	// gateEvent is the name of the span event each stage's outcome adds.
	gateEvent = "axag.gate"
	// passedEvent is the name of the event that lists the gates a call
	// passed (GateEventsSummary).
	passedEvent = "axag.gates"
	// outcomes of a gate event.
	outcomePass       = "pass"
	outcomeDeny       = "deny"
	outcomeShadowDeny = "shadow_deny"
	// maxToolNameAttr bounds a tool name the manifest does not declare
	// before it goes into a span attribute: it comes from the caller.
	maxToolNameAttr = 128
	// maxCached bounds each lazily filled cache of attribute sets, so that
	// unexpected codes or stage names cannot grow memory without bound.
	maxCached = 512
)

// durationBuckets are the histogram boundaries, in seconds, of
// axag.call.duration and axag.gate.duration: gates take microseconds, tools
// up to seconds, so the SDK's default (0 … 10000, meant for milliseconds)
// would put everything in its first bucket.
var durationBuckets = []float64{
	0.000_001, 0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Redactor decides what of a call's arguments its span and its audit record may carry.
//
// The span records them as gen_ai.tool.call.arguments. args is a fresh copy
// of the arguments, which the redactor may change and return; action is the
// resolved manifest action. The result is recorded as JSON; nil records
// nothing. Arguments are never recorded without a Redactor.
type Redactor func(action *manifest.Action, args map[string]any) any

// RedactExcept returns a Redactor that records the values of the named
// top-level arguments and replaces every other value with "[REDACTED]", so
// that an argument added later is hidden until someone names it here.
func RedactExcept(keep ...string) Redactor {
	allowed := make(map[string]bool, len(keep))
	for _, k := range keep {
		allowed[k] = true
	}
	return func(_ *manifest.Action, args map[string]any) any {
		for k := range args {
			if !allowed[k] {
				args[k] = "[REDACTED]"
			}
		}
		return args
	}
}

// GateEvents says which gates' outcomes become span events.
type GateEvents int

const (
	// GateEventsSummary keeps every gate's outcome in one event, plus the refusal's event. It is the default.
	//
	// The one "axag.gates" event, whose axag.gates.passed lists, in
	// order, the gates the call passed, is added when the call leaves
	// the gates (before a refusal's own event, or when the chain
	// returns). It costs a few allocations more than GateEventsRefusals
	// and fewer than GateEventsAll (bench/README.md, section
	// Observability). The events then say nothing of when each gate
	// finished; axag.gate.duration does, with GateDurations.
	GateEventsSummary GateEvents = iota
	// GateEventsAll adds an event for every gate the call passed and for
	// the refusal, if any: the whole path of the call, with the time each
	// gate finished.
	GateEventsAll
	// GateEventsRefusals adds an event only for the refusal.
	//
	// Each event costs the tracing SDK a clock read, a copy of its
	// attributes and its share of the span's growing event list, so on an
	// action that passes all eleven standard gates the pass events are much
	// of what tracing adds to an allowed call (bench/README.md, section
	// Observability, has the figures); the gates' times can still be recorded in
	// axag.gate.duration (GateDurations).
	GateEventsRefusals
)

// TelemetryConfig configures NewTelemetry (and the root package's
// WithTelemetry). The zero value traces and measures with the global
// providers, audits nothing and never records argument values.
type TelemetryConfig struct {
	// TracerProvider makes the spans. Nil means the global provider
	// (otel.GetTracerProvider), which follows a provider installed later with
	// otel.SetTracerProvider. A trace/noop provider turns tracing off.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments axag.decisions and
	// axag.call.duration (and axag.gate.duration with GateDurations). Nil
	// means the global provider (otel.GetMeterProvider); a metric/noop
	// provider turns metrics off.
	MeterProvider metric.MeterProvider
	// Audit receives one record per decision (a database, a queue;
	// MultiAudit joins several); nil means no audit.
	Audit AuditSink
	// RecordArguments, when set, records the arguments of each call on its
	// span (gen_ai.tool.call.arguments) and in its audit record, as it
	// returns them (for example RedactExcept("query")). When nil argument
	// values are never recorded, only their names.
	RecordArguments Redactor
	// GateEvents says which gate outcomes become span events: one event
	// listing the gates passed plus the refusal (GateEventsSummary, the
	// default), every gate's (GateEventsAll) or only the refusal
	// (GateEventsRefusals).
	GateEvents GateEvents
	// GateDurations, when set, records each gate's time in the histogram
	// axag.gate.duration (attribute axag.gate), one point per gate a call
	// passes or is refused by. Off by default: the points and the clock
	// read at every stage boundary they need are most of what axgate adds
	// to a traced call beyond its span and its two call metrics
	// (bench/README.md, section Observability).
	GateDurations bool
}

// Telemetry traces, measures and audits every call through a chain.
//
// Its Stage goes outermost, around every gate, and it is the chain's
// Observer, so it hears each gate's outcome and time.
//
// Spans are named "execute_tool {tool}" and carry the GenAI attributes
// (gen_ai.operation.name, gen_ai.tool.name, gen_ai.tool.call.id) and axag.intent,
// axag.action_type, axag.risk_level, axag.decision, axag.error.code and
// axag.gate; each gate's outcome is an "axag.gate" event and a refusal sets
// the status to error. Metrics are axag.decisions and axag.call.duration
// (and axag.gate.duration with TelemetryConfig.GateDurations), with
// low-cardinality attributes only.
//
// Attribute sets are prepared once per action, stage and code, so a call
// allocates nothing for them; with tracing or metrics off their instruments
// are not touched at all.
type Telemetry struct {
	tracer  trace.Tracer // nil: tracing off
	metrics bool
	// tracerGlobal and meterGlobal are set when the tracer or the meter
	// came from the global provider while it was still OpenTelemetry's
	// default delegate: it records nothing until a provider is installed
	// with otel.SetTracerProvider (otel.SetMeterProvider), and from then on
	// forwards to it. Recording asks the global provider each time.
	tracerGlobal, meterGlobal bool
	// gateDurations is set when axag.gate.duration is recorded
	// (TelemetryConfig.GateDurations with metrics on).
	gateDurations bool

	decisions    metric.Int64Counter
	callDuration metric.Float64Histogram
	gateDuration metric.Float64Histogram

	audit  AuditSink
	redact Redactor
	events GateEvents

	// passedPaths are the prepared axag.gates events, by the names of the
	// gates passed joined with NUL bytes.
	passedPaths pathCache

	byTool   map[string]*actionTelemetry
	byAction map[*manifest.Action]*actionTelemetry
	unknown  *actionTelemetry

	gates cache[string, *gateTelemetry]
}

// actionTelemetry is what is prepared for one action.
type actionTelemetry struct {
	action    *manifest.Action
	spanName  string
	startOpts []trace.SpanStartOption
	// static are the action's own span attributes, set at the end when the
	// span was started before the action was known.
	static []attribute.KeyValue
	// allowAttrs are the span attributes of an allowed call.
	allowAttrs []attribute.KeyValue
	intentAttr []attribute.KeyValue
	outcomes   cache[outcomeKey, *outcomeTelemetry]
}

type outcomeKey struct {
	decision string
	code     axerr.Code
	check    bool
}

// outcomeTelemetry holds the metric options of one decision of one action.
type outcomeTelemetry struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// gateTelemetry is what is prepared for one stage name.
type gateTelemetry struct {
	record []metric.RecordOption
	pass   []trace.EventOption
	attr   attribute.KeyValue
}

// NewTelemetry prepares the telemetry of the actions of m.
func NewTelemetry(m *manifest.Manifest, cfg TelemetryConfig) (*Telemetry, error) {
	t := &Telemetry{
		audit:    cfg.Audit,
		redact:   cfg.RecordArguments,
		events:   cfg.GateEvents,
		byTool:   make(map[string]*actionTelemetry),
		byAction: make(map[*manifest.Action]*actionTelemetry),
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
		t.tracerGlobal = isGlobalDelegate(tp)
	}
	if !isNoopTracer(tp) {
		t.tracer = tp.Tracer(instrumentationName)
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
		t.meterGlobal = isGlobalDelegate(mp)
	}
	if !isNoopMeter(mp) {
		if err := t.instruments(mp.Meter(instrumentationName), cfg.GateDurations); err != nil {
			return nil, err
		}
		t.metrics = true
		t.gateDurations = cfg.GateDurations
	}
	if m != nil {
		for _, a := range m.Checked() {
			at := newActionTelemetry(a)
			t.byAction[a] = at
			if a.ToolName() != "" { // a resource's or prompt's action is no tool
				t.byTool[a.ToolName()] = at
			}
		}
	}
	t.unknown = newActionTelemetry(nil)
	return t, nil
}

func isNoopTracer(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return false
}

func isNoopMeter(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return false
}

// globalPackage is where OpenTelemetry keeps its default global providers:
// delegates that record nothing until a provider is installed, and then
// forward every tracer, meter and instrument they made to it.
const globalPackage = "go.opentelemetry.io/otel/internal/global"

// isGlobalDelegate reports whether p is one of OpenTelemetry's default
// global providers (no provider was installed yet).
func isGlobalDelegate(p any) bool {
	t := reflect.TypeOf(p)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == globalPackage
}

// The types of the default global providers, as OpenTelemetry made them
// (nil when a provider was installed before this package was initialized);
// a provider of another type was installed.
var (
	delegateTracerType = delegateType(otel.GetTracerProvider())
	delegateMeterType  = delegateType(otel.GetMeterProvider())
)

func delegateType(p any) reflect.Type {
	if !isGlobalDelegate(p) {
		return nil
	}
	return reflect.TypeOf(p)
}

// globalTracing reports whether a global tracer provider that records was
// installed: neither the default delegate nor a no-op one. It costs an
// atomic load and two type comparisons.
func globalTracing() bool {
	tp := otel.GetTracerProvider()
	return reflect.TypeOf(tp) != delegateTracerType && !isNoopTracer(tp)
}

// globalMetrics is globalTracing for the meter provider.
func globalMetrics() bool {
	mp := otel.GetMeterProvider()
	return reflect.TypeOf(mp) != delegateMeterType && !isNoopMeter(mp)
}

func (t *Telemetry) instruments(meter metric.Meter, gateDurations bool) error {
	var err error
	if t.decisions, err = meter.Int64Counter("axag.decisions",
		metric.WithDescription("Tool calls decided by axgate, by intent, decision and error code."),
		metric.WithUnit("{call}")); err != nil {
		return fmt.Errorf("axag.decisions: %w", err)
	}
	if t.callDuration, err = meter.Float64Histogram("axag.call.duration",
		metric.WithDescription("Time of a tool call through the whole chain, tool included when it ran."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return fmt.Errorf("axag.call.duration: %w", err)
	}
	if !gateDurations {
		return nil
	}
	if t.gateDuration, err = meter.Float64Histogram("axag.gate.duration",
		metric.WithDescription("Time a gate of the chain spent on a call before passing it on or refusing it."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return fmt.Errorf("axag.gate.duration: %w", err)
	}
	return nil
}

func newActionTelemetry(a *manifest.Action) *actionTelemetry {
	at := &actionTelemetry{action: a, spanName: operationExecuteTool}
	start := []attribute.KeyValue{keyOperationName.String(operationExecuteTool)}
	if a != nil {
		at.spanName = operationExecuteTool + " " + a.ToolName()
		if a.ToolName() == "" {
			// A gateway's resource or prompt: no tool, named by its intent.
			at.spanName = operationExecuteTool + " " + a.Intent
		}
		at.static = []attribute.KeyValue{
			keyIntent.String(a.Intent),
			keyActionType.String(string(a.Type)),
			keyRiskLevel.String(string(riskOf(a))),
		}
		at.intentAttr = []attribute.KeyValue{keyIntent.String(a.Intent)}
		if a.ToolName() != "" {
			start = append(start, keyToolName.String(a.ToolName()))
		}
		start = append(start, at.static...)
	}
	at.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(start...)}
	at.allowAttrs = []attribute.KeyValue{keyDecision.String(DecisionAllow)}
	return at
}

// riskOf is the action's risk level, "none" when the manifest leaves it out.
func riskOf(a *manifest.Action) manifest.RiskLevel {
	if a.RiskLevel == "" {
		return manifest.RiskNone
	}
	return a.RiskLevel
}

// Enabled reports whether the telemetry records anything: tracing, metrics or
// an audit sink. An enforcer leaves a disabled Telemetry out of its chain.
func (t *Telemetry) Enabled() bool { return t.tracer != nil || t.metrics || t.audit != nil }

// Recording reports whether tracing or metrics record anything now.
//
// It is false when both are off (no-op providers) or come from the global
// providers while no provider was installed (OpenTelemetry's default
// delegates, which record nothing). The global providers are asked on each
// call, which costs a few nanoseconds, so that a provider installed with
// otel.SetTracerProvider or otel.SetMeterProvider after the chain was built
// is honoured from the next call on. An enforcer runs a call through a chain
// without the observe stage and without an Observer while Recording is
// false (with only AuditStage when an audit sink is set).
func (t *Telemetry) Recording() bool {
	if t.tracer != nil && (!t.tracerGlobal || globalTracing()) {
		return true
	}
	return t.metrics && (!t.meterGlobal || globalMetrics())
}

// Auditing reports whether an audit sink is set.
func (t *Telemetry) Auditing() bool { return t.audit != nil }

// Stage returns the stage that traces, measures and audits each call. Put it
// outermost, and pass t as the chain's Observer.
func (t *Telemetry) Stage() Stage { return Stage{Name: StageObserve, Interceptor: t.intercept} }

// AuditStage returns a stage that only audits each call: no span, no
// metrics, no Observer needed. It is what an enforcer runs instead of Stage
// while Recording is false and an audit sink is set.
func (t *Telemetry) AuditStage() Stage {
	return Stage{Name: StageObserve, Interceptor: t.auditOnly}
}

func (t *Telemetry) auditOnly(ctx context.Context, call *Call, next Invoker) (Result, error) {
	if t.audit == nil {
		return next.Invoke(ctx, call)
	}
	start := time.Now()
	at := t.lookup(call)
	panicked := true
	defer func() {
		if panicked {
			t.audited(ctx, call, at, start, axerr.New(axerr.CodeInternal, "the call panicked"))
		}
	}()
	res, err := next.Invoke(ctx, call)
	panicked = false
	t.audited(ctx, call, at, start, err)
	return res, err
}

// audited writes the audit record of a call the audit-only stage saw.
func (t *Telemetry) audited(ctx context.Context, call *Call, started *actionTelemetry, start time.Time, err error) {
	end := time.Now()
	at := started
	if call.Action != nil && call.Action != started.action {
		at = t.forAction(call.Action)
	}
	var args json.RawMessage
	if t.redact != nil && at.action != nil {
		args = t.recordedArguments(call, at.action)
	}
	t.audit.Audit(ctx, auditRecord(ctx, call, at.action, callOutcome(call, err), start, end, args))
}

// callTelemetry is what the stage keeps about a call whose span records,
// for the observer to add gate events to. It hangs off the Call rather than
// the context, which would cost an allocation per call and a lookup per
// gate, and it is pooled.
type callTelemetry struct {
	// owner is the Telemetry that started span: a chain observed by another
	// Telemetry leaves this call's span alone.
	owner *Telemetry
	span  trace.Span
	// denied is set once a gate's refusal was added as an event.
	denied bool
	// passed are the gates passed so far and key their names joined with
	// NUL bytes, for the summary event; both keep their capacity in the pool.
	passed []string
	key    []byte
	// end holds the span's end option, so that ending it with the time the
	// stage read allocates no option slice.
	end [1]trace.SpanEndOption
}

var callTelemetryPool = sync.Pool{New: func() any { return new(callTelemetry) }}

func (t *Telemetry) intercept(ctx context.Context, call *Call, next Invoker) (Result, error) {
	// Inside Build's observed chain the clock was read as this stage began
	// (Call.pendingStart): the call's time starts there, with no read of its
	// own. Run some other way, it reads the clock.
	start := call.pendingStart
	if call.pendingStage != StageObserve || start.IsZero() {
		start = time.Now()
	}
	at := t.lookup(call)
	var (
		span trace.Span
		st   *callTelemetry
	)
	prev := call.telemetry
	if t.tracer != nil {
		ctx, span = t.tracer.Start(ctx, at.spanName, at.startOpts...)
		if span.IsRecording() {
			st = callTelemetryPool.Get().(*callTelemetry)
			st.owner, st.span = t, span
			call.telemetry = st
			if at.action == nil {
				span.SetAttributes(keyToolName.String(boundedToolName(call.Tool)))
			}
			if call.ID != "" {
				span.SetAttributes(keyToolCallID.String(call.ID))
			}
		}
	}
	// A tool that panics still gets its span ended, its metrics and its
	// audit record (as AXGATE_INTERNAL); the panic then goes on unchanged.
	panicked := true
	defer func() {
		if panicked {
			t.complete(ctx, call, at, st, span, prev, start, axerr.New(axerr.CodeInternal, "the call panicked"))
		}
	}()
	res, err := next.Invoke(ctx, call)
	panicked = false
	t.complete(ctx, call, at, st, span, prev, start, err)
	return res, err
}

// complete records the call's outcome and ends its span.
func (t *Telemetry) complete(ctx context.Context, call *Call, at *actionTelemetry, st *callTelemetry, span trace.Span, prev *callTelemetry, start time.Time, err error) {
	end := time.Now()
	t.finish(ctx, call, at, st, start, end, err)
	if st != nil {
		call.telemetry = prev
		st.end[0] = trace.WithTimestamp(end)
		span.End(st.end[:]...)
		*st = callTelemetry{passed: st.passed[:0], key: st.key[:0]}
		callTelemetryPool.Put(st)
	} else if span != nil {
		span.End()
	}
}

// lookup returns what was prepared for the call's action: the one the
// transport resolved, or the one its tool name names.
func (t *Telemetry) lookup(call *Call) *actionTelemetry {
	if call.Action != nil {
		return t.forAction(call.Action)
	}
	if at, ok := t.byTool[call.Tool]; ok {
		return at
	}
	return t.unknown
}

func (t *Telemetry) forAction(a *manifest.Action) *actionTelemetry {
	if at, ok := t.byAction[a]; ok {
		return at
	}
	// An action from outside the manifest the telemetry was built for.
	return newActionTelemetry(a)
}

// outcome is how a call ended.
type outcome struct {
	decision string
	code     axerr.Code
	gate     string
	err      *axerr.Error
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{decision: DecisionAllow}
	}
	ae, ok := axerr.As(err)
	if !ok {
		// Every stage must refuse with an *axerr.Error: a plain error is a
		// fault of the chain's configuration.
		return outcome{decision: DecisionDeny, code: axerr.CodeInternal}
	}
	o := outcome{decision: DecisionDeny, code: ae.Code, gate: ae.Gate, err: ae}
	if ae.Gate == gateTool {
		// The gates allowed the call; the tool itself failed.
		o.decision = DecisionAllow
	}
	return o
}

// callOutcome is outcomeOf, but an allowed call that shadow mode let pass
// (Facts.ShadowRefusals) is DecisionShadowDeny, with the first would-be
// refusal's code and gate.
func callOutcome(call *Call, err error) outcome {
	o := outcomeOf(err)
	if err == nil && len(call.Facts.ShadowRefusals) > 0 {
		first := call.Facts.ShadowRefusals[0]
		o = outcome{decision: DecisionShadowDeny, code: first.Code, gate: first.Gate, err: first}
	}
	return o
}

func (t *Telemetry) finish(ctx context.Context, call *Call, started *actionTelemetry, st *callTelemetry, start, end time.Time, err error) {
	at := started
	if call.Action != nil && call.Action != started.action {
		at = t.forAction(call.Action)
	}
	o := callOutcome(call, err)
	var args json.RawMessage
	if t.redact != nil && at.action != nil && (st != nil || t.audit != nil) {
		args = t.recordedArguments(call, at.action)
	}
	if st != nil {
		t.annotate(st, call, started, at, o, args)
	}
	if t.metrics {
		ot := at.outcome(o, call.CheckOnly())
		t.decisions.Add(ctx, 1, ot.add...)
		t.callDuration.Record(ctx, end.Sub(start).Seconds(), ot.record...)
	}
	if t.audit != nil {
		t.audit.Audit(ctx, auditRecord(ctx, call, at.action, o, start, end, args))
	}
}

// annotate sets the decision on a recording span.
func (t *Telemetry) annotate(st *callTelemetry, call *Call, started, at *actionTelemetry, o outcome, args json.RawMessage) {
	span := st.span
	if at != started && at.action != nil {
		span.SetAttributes(at.static...)
	}
	if call.CheckOnly() {
		span.SetAttributes(keyCheckOnly.Bool(true))
	}
	if call.Facts.Replayed {
		span.SetAttributes(keyReplayed.Bool(true))
	}
	if args != nil {
		span.SetAttributes(keyToolArguments.String(string(args)))
	}
	t.addPassed(st)
	if o.code == "" {
		span.SetAttributes(at.allowAttrs...)
		return
	}
	kv := make([]attribute.KeyValue, 0, 4)
	kv = append(kv, keyDecision.String(o.decision))
	errType := string(o.code)
	kv = append(kv, keyCode.String(errType))
	if o.gate != "" {
		kv = append(kv, keyGate.String(o.gate))
	}
	if o.decision == DecisionShadowDeny {
		// The call ran: the span says what would have refused it, with no
		// error status.
		span.SetAttributes(kv...)
		for _, r := range call.Facts.ShadowRefusals {
			attrs := denyAttrs(r.Gate, r)
			attrs[1] = keyOutcome.String(outcomeShadowDeny)
			span.AddEvent(gateEvent, trace.WithAttributes(attrs...))
		}
		return
	}
	kv = append(kv, keyErrorType.String(errType))
	span.SetAttributes(kv...)
	if !st.denied && o.gate != "" {
		// Refusals the observer did not hear: the tool's, and a stage's
		// that refused after the tool ran (postconditions).
		span.AddEvent(gateEvent, trace.WithAttributes(denyAttrs(o.gate, o.err)...))
	}
	span.SetStatus(codes.Error, errType)
}

// recordedArguments runs the redactor on a fresh copy of the arguments.
func (t *Telemetry) recordedArguments(call *Call, a *manifest.Action) json.RawMessage {
	if _, err := call.Args(); err != nil {
		return nil
	}
	var fresh map[string]any
	if len(call.Arguments) == 0 || string(call.Arguments) == "null" {
		fresh = map[string]any{}
	} else if err := json.Unmarshal(call.Arguments, &fresh); err != nil {
		return nil
	}
	kept := t.redact(a, fresh)
	if kept == nil {
		return nil
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return nil
	}
	return out
}

func (at *actionTelemetry) outcome(o outcome, check bool) *outcomeTelemetry {
	return at.outcomes.get(outcomeKey{decision: o.decision, code: o.code, check: check}, func() *outcomeTelemetry {
		kv := make([]attribute.KeyValue, 0, 4)
		kv = append(kv, at.intentAttr...)
		kv = append(kv, keyDecision.String(o.decision))
		if o.code != "" {
			kv = append(kv, keyCode.String(string(o.code)))
		}
		if check {
			kv = append(kv, keyCheckOnly.Bool(true))
		}
		opt := metric.WithAttributeSet(attribute.NewSet(kv...))
		return &outcomeTelemetry{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
	})
}

// TimesStages reports whether the telemetry records the gates' times
// (TelemetryConfig.GateDurations): when it does not, a chain it observes
// reads no clock per stage. The chain asks it once, when it is built.
func (t *Telemetry) TimesStages() bool { return t.gateDurations }

// StageDone records a stage's time and adds its outcome to the call's span.
// It implements Observer.
func (t *Telemetry) StageDone(_ context.Context, call *Call, stage string, d time.Duration, err error) {
	if stage == StageObserve {
		return
	}
	g := t.gates.get(stage, func() *gateTelemetry {
		attr := keyGate.String(stage)
		return &gateTelemetry{
			attr:   attr,
			record: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attr))},
			pass:   []trace.EventOption{trace.WithAttributes(attr, keyOutcome.String(outcomePass))},
		}
	})
	// Without the call's context: the SDK would otherwise attach an exemplar
	// (a clock read and a copy) to every gate's point of a sampled call.
	// axag.call.duration keeps the exemplars. Enabled is false when a view
	// drops the histogram, which then costs next to nothing.
	if bg := context.Background(); t.gateDurations && t.gateDuration.Enabled(bg) {
		t.gateDuration.Record(bg, d.Seconds(), g.record...)
	}
	st := call.telemetry
	if st == nil || st.owner != t {
		return
	}
	if err == nil {
		switch t.events {
		case GateEventsAll:
			st.span.AddEvent(gateEvent, g.pass...)
		case GateEventsSummary:
			st.passed = append(st.passed, stage)
		}
		return
	}
	t.addPassed(st)
	ae, _ := axerr.As(err)
	st.denied = true
	st.span.AddEvent(gateEvent, trace.WithAttributes(denyAttrs(stage, ae)...))
}

// addPassed adds the summary event of the gates passed so far, if any, and
// forgets them.
func (t *Telemetry) addPassed(st *callTelemetry) {
	if len(st.passed) == 0 {
		return
	}
	st.key = st.key[:0]
	for i, name := range st.passed {
		if i > 0 {
			st.key = append(st.key, 0)
		}
		st.key = append(st.key, name...)
	}
	opts := t.passedPaths.get(st.key, st.passed)
	st.passed = st.passed[:0]
	st.span.AddEvent(passedEvent, opts...)
}

// denyAttrs describe a refusal without the values of the arguments: the
// code and the JSON Pointers of the violations, never the messages, which may
// quote a value.
func denyAttrs(gate string, ae *axerr.Error) []attribute.KeyValue {
	kv := []attribute.KeyValue{keyGate.String(gate), keyOutcome.String(outcomeDeny)}
	if ae == nil {
		return kv
	}
	kv = append(kv, keyCode.String(string(ae.Code)))
	if len(ae.Violations) > 0 {
		paths := make([]string, len(ae.Violations))
		for i, v := range ae.Violations {
			paths[i] = v.Path
		}
		kv = append(kv, keyPaths.StringSlice(paths))
	}
	return kv
}

// boundedToolName is a caller-chosen tool name made safe for an attribute:
// valid UTF-8 and at most maxToolNameAttr bytes.
func boundedToolName(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxToolNameAttr {
		return s
	}
	cut := maxToolNameAttr
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// pathCache holds the prepared options of axag.gates events, like cache but
// looked up by the bytes of the key, so that a hit allocates nothing.
type pathCache struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string][]trace.EventOption]
}

func (c *pathCache) get(key []byte, passed []string) []trace.EventOption {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[string(key)]; ok {
			return v
		}
	}
	build := func() []trace.EventOption {
		return []trace.EventOption{trace.WithAttributes(keyPassed.StringSlice(passed))}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[string(key)]; ok {
			return v
		}
		if len(*old) >= maxCached {
			return build()
		}
	}
	v := build()
	next := make(map[string][]trace.EventOption, 1+lenOf(old))
	if old != nil {
		for k2, v2 := range *old {
			next[k2] = v2
		}
	}
	next[string(key)] = v
	c.m.Store(&next)
	return v
}

// cache is a copy-on-write map: reads take no lock and allocate nothing;
// a miss builds the value once under a lock. It stops growing at maxCached
// entries (then values are built per use).
type cache[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (c *cache[K, V]) get(k K, build func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		if len(*old) >= maxCached {
			return build()
		}
	}
	v := build()
	next := make(map[K]V, 1+lenOf(old))
	if old != nil {
		for k2, v2 := range *old {
			next[k2] = v2
		}
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

func lenOf[K comparable, V any](m *map[K]V) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
