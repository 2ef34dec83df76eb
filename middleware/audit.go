package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
)

// AuditRecord is what the audit log keeps of one decision. It names the
// parameters a call carried but holds none of their values (unless an
// argument Redactor was configured, whose output is in Arguments).
type AuditRecord struct {
	// Time is when the decision was made.
	Time time.Time
	// Duration is the call's time through the chain, the tool included when
	// it ran.
	Duration time.Duration

	// Intent is the resolved manifest intent, "" when the tool is unknown.
	Intent string
	// Tool is the tool name the caller asked for, cut to 128 bytes (an
	// undeclared tool's name is the caller's choice), as on the span.
	Tool string
	// CallID is the transport's id of the call, when it has one.
	CallID string
	// ActionType and RiskLevel are the action's, as the manifest declares.
	ActionType manifest.ActionType
	RiskLevel  manifest.RiskLevel

	// PrincipalID and Tenant are the authenticated caller's.
	PrincipalID string
	Tenant      string

	// Decision is DecisionAllow or DecisionDeny.
	Decision string
	// Code is the refusal's (or the tool failure's) code, "" when the call
	// succeeded.
	Code axerr.Code
	// Gate is the stage that decided a refusal ("tool" for a tool failure).
	Gate string
	// CheckOnly is true for a check that ran the gates without the tool.
	CheckOnly bool

	// Params are the names of the declared arguments the call carried,
	// sorted, followed by "+N undeclared" when it carried others (their
	// names are the caller's choice and are not recorded).
	Params []string
	// Arguments are the arguments as the Redactor returned them; nil unless
	// argument recording was configured.
	Arguments json.RawMessage

	// ConfirmationJTI is the id of the confirmation token the call presented,
	// and ConfirmationElicited whether the person confirmed inline instead;
	// ConfirmationRequestID the confirmation request the person decided on
	// a decision page, when the call ran on it.
	ConfirmationJTI       string
	ConfirmationElicited  bool
	ConfirmationRequestID string
	// Approvers are the ids of the people whose approvals the call carried,
	// and ApprovalRequestID the approval request they answered.
	Approvers         []string
	ApprovalRequestID string
	// Replayed is true when an idempotent retry was answered from the stored
	// result.
	Replayed bool
	// Warnings are things a gate let pass but wanted recorded.
	Warnings []string
	// SideEffects are the action's declared side effects.
	SideEffects []string

	// TraceID and SpanID identify the call's span (hex), when there is one.
	TraceID string
	SpanID  string
}

// AuditSink stores audit records. Audit is called once per decision, after it
// was made, on the calling goroutine: a sink that writes somewhere slow
// should queue. The call's outcome is decided already, so a sink reports its
// own failures its own way.
type AuditSink interface {
	Audit(ctx context.Context, r AuditRecord)
}

// AuditFunc adapts a function to AuditSink.
type AuditFunc func(ctx context.Context, r AuditRecord)

// Audit calls f.
func (f AuditFunc) Audit(ctx context.Context, r AuditRecord) { f(ctx, r) }

// MultiAudit returns a sink that hands each record to every sink in turn.
// Nil sinks are skipped; with none left it returns nil.
func MultiAudit(sinks ...AuditSink) AuditSink {
	var out multiAudit
	for _, s := range sinks {
		if s != nil {
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type multiAudit []AuditSink

func (m multiAudit) Audit(ctx context.Context, r AuditRecord) {
	for _, s := range m {
		s.Audit(ctx, r)
	}
}

// AuditMessage is the message of every audit log record.
const AuditMessage = "axgate decision"

// SlogAudit returns a sink that writes each record to logger: level Info for
// an allowed call, Warn for a refusal (and a tool failure), message
// AuditMessage, with the record's fields as attributes (snake_case keys;
// empty optional fields left out).
func SlogAudit(logger *slog.Logger) AuditSink {
	if logger == nil {
		return nil
	}
	return slogAudit{logger}
}

type slogAudit struct{ l *slog.Logger }

func (s slogAudit) Audit(ctx context.Context, r AuditRecord) {
	level := slog.LevelInfo
	if r.Code != "" {
		level = slog.LevelWarn
	}
	h := s.l.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	if jh, ok := h.(*jsonAuditHandler); ok && jh.direct(&r) {
		_ = jh.audit(level, &r)
		return
	}
	// The attributes are gathered first and added at once: the record then
	// grows its storage once, not once per group of them.
	var buf [24]slog.Attr
	attrs := append(buf[:0],
		slog.String("intent", r.Intent),
		slog.String("tool", r.Tool),
		slog.String("principal", r.PrincipalID),
		slog.String("tenant", r.Tenant),
		slog.String("risk_level", string(r.RiskLevel)),
		slog.String("decision", r.Decision),
	)
	if r.Code != "" {
		attrs = append(attrs, slog.String("code", string(r.Code)), slog.String("gate", r.Gate))
	}
	if r.CallID != "" {
		attrs = append(attrs, slog.String("call_id", r.CallID))
	}
	if r.ActionType != "" {
		attrs = append(attrs, slog.String("action_type", string(r.ActionType)))
	}
	if r.CheckOnly {
		attrs = append(attrs, slog.Bool("check_only", true))
	}
	attrs = append(attrs, slog.Any("params", nonNil(r.Params)))
	if r.Arguments != nil {
		attrs = append(attrs, slog.Any("arguments", r.Arguments))
	}
	if r.ConfirmationJTI != "" || r.ConfirmationElicited {
		attrs = append(attrs, slog.String("confirmation_jti", r.ConfirmationJTI), slog.Bool("confirmation_elicited", r.ConfirmationElicited))
	}
	if r.ConfirmationRequestID != "" {
		attrs = append(attrs, slog.String("confirmation_request_id", r.ConfirmationRequestID))
	}
	if len(r.Approvers) > 0 || r.ApprovalRequestID != "" {
		attrs = append(attrs, slog.Any("approvers", nonNil(r.Approvers)), slog.String("approval_request_id", r.ApprovalRequestID))
	}
	if r.Replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	if len(r.Warnings) > 0 {
		attrs = append(attrs, slog.Any("warnings", r.Warnings))
	}
	if len(r.SideEffects) > 0 {
		attrs = append(attrs, slog.Any("side_effects", r.SideEffects))
	}
	attrs = append(attrs, slog.Duration("duration", r.Duration))
	if r.TraceID != "" {
		attrs = append(attrs, slog.String("trace_id", r.TraceID), slog.String("span_id", r.SpanID))
	}
	rec := slog.NewRecord(r.Time, level, AuditMessage, 0)
	rec.AddAttrs(attrs...)
	_ = h.Handle(ctx, rec)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// auditRecord builds the record of a decided call. ctx carries the call's
// span, if any.
func auditRecord(ctx context.Context, call *Call, a *manifest.Action, o outcome, start, end time.Time, args json.RawMessage) AuditRecord {
	r := AuditRecord{
		Time:                  end,
		Duration:              end.Sub(start),
		Tool:                  boundedToolName(call.Tool), // the caller's choice for an undeclared tool, as on the span
		CallID:                call.ID,
		PrincipalID:           call.Principal.ID,
		Tenant:                call.Principal.Tenant,
		Decision:              o.decision,
		Code:                  o.code,
		Gate:                  o.gate,
		CheckOnly:             call.CheckOnly(),
		Params:                paramNames(call),
		Arguments:             args,
		ConfirmationJTI:       call.Facts.ConfirmationJTI,
		ConfirmationElicited:  call.Facts.ConfirmationElicited,
		ConfirmationRequestID: call.Facts.ConfirmationRequestID,
		Approvers:             call.Facts.Approvers,
		ApprovalRequestID:     call.Facts.ApprovalRequestID,
		Replayed:              call.Facts.Replayed,
		Warnings:              call.Facts.Warnings,
	}
	if a != nil {
		r.Intent = a.Intent
		r.ActionType = a.Type
		r.RiskLevel = riskOf(a)
		r.SideEffects = a.SideEffects
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.TraceID = sc.TraceID().String()
		r.SpanID = sc.SpanID().String()
	}
	return r
}

// paramNames are the sorted names of the arguments, nil when the arguments
// are not an object.
func paramNames(call *Call) []string {
	args, err := call.Args()
	if err != nil {
		return nil
	}
	// Only names the manifest declares are recorded: the others are the
	// caller's choice, and a key can smuggle a value (or a megabyte) into
	// the log. They are counted instead.
	names := make([]string, 0, len(args))
	undeclared := 0
	for k := range args {
		if call.Action != nil && call.Action.Param(k) != nil {
			names = append(names, k)
		} else {
			undeclared++
		}
	}
	slices.Sort(names)
	if undeclared > 0 {
		names = append(names, fmt.Sprintf("+%d undeclared", undeclared))
	}
	return names
}
