package errors

import (
	"context"
	"encoding/json"
	stderrors "errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Violation is one thing wrong with the arguments of a call.
type Violation struct {
	// Path is a JSON Pointer (RFC 6901) to the offending value; "" is the
	// whole argument object.
	Path string `json:"path"`
	// Message is the validator's own words.
	Message string `json:"message"`
	// Keyword is the JSON Schema keyword that failed (required, type, …).
	Keyword string `json:"keyword,omitempty"`
	// Code is the AXAG code this violation maps to.
	Code Code `json:"code,omitempty"`
}

// Error is a refusal: every gate answers with one.
type Error struct {
	// Code is the machine-readable code; Type, HTTP status and retryability
	// follow from it.
	Code Code
	// Message is written for a person.
	Message string
	// Intent is the manifest intent of the refused call, when known.
	Intent string
	// Suggestion says how to get the call accepted, when there is a way.
	Suggestion string
	// Violations lists every parameter problem at once.
	Violations []Violation
	// RetryAfter, when positive, is how long to wait before calling again.
	RetryAfter time.Duration
	// Gate names the gate that refused; the chain fills it in.
	Gate string
	// Details holds further facts an agent or UI can act on (reason,
	// args_sha256, approval_request_id, …). Keys are snake_case.
	Details map[string]any
	// Err is the underlying cause. It is never rendered to the caller.
	Err error

	// retry, when set, overrides the code's retryability (WithRetryable).
	retry *bool
}

// New returns an *Error with the code and message.
func New(code Code, message string) *Error {
	return &Error{Code: code, Message: message}
}

// Newf is New with a formatted message.
func Newf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error returns "CODE: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause, so errors.Is and errors.As see through it.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is this error's Code, or an *Error with the same
// Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return t == e.Code
	case *Error:
		return t.Code == e.Code
	}
	return false
}

// Type returns the category of the error's code.
func (e *Error) Type() Type { return e.Code.Type() }

// HTTPStatus returns the status of the error table for the code.
func (e *Error) HTTPStatus() int { return e.Code.HTTPStatus() }

// Retryable reports whether an agent may call again: as the code says,
// unless WithRetryable said otherwise for this refusal.
func (e *Error) Retryable() bool {
	if e.retry != nil {
		return *e.retry
	}
	return e.Code.Retryable()
}

// WithRetryable sets whether calling again may succeed, for this refusal only.
//
// It returns e. A tool's failure (AXGATE_TOOL_FAILED) is retryable
// by its code; one that calling again will not cure (a file that does not
// exist) is marked WithRetryable(false), and its agent action then says not
// to repeat the call unchanged.
func (e *Error) WithRetryable(retryable bool) *Error { e.retry = &retryable; return e }

// notRetryableAction is the agent action of a refusal of a retryable code
// marked not retryable.
const notRetryableAction = "Do not call again with the same arguments: change what the message names, or report the failure."

// agentAction is what the envelope and the text say an agent does next.
func (e *Error) agentAction() string {
	if a, ok := e.Details[DetailAgentAction].(string); ok && a != "" {
		return a
	}
	if e.retry != nil && !*e.retry && e.Code.Retryable() {
		return notRetryableAction
	}
	return e.Code.AgentAction()
}

// Clone returns a copy of e that shares nothing mutable with it (details and
// violations are copied), so that a gate can annotate a refusal it did not
// create — a package-level error a checker returns, say — without changing
// it for everyone else.
func (e *Error) Clone() *Error {
	c := *e
	c.Details = maps.Clone(e.Details)
	c.Violations = slices.Clone(e.Violations)
	return &c
}

// With sets a detail and returns e, for chaining at construction.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = make(map[string]any, 4)
	}
	e.Details[key] = value
	return e
}

// WithIntent sets the intent and returns e.
func (e *Error) WithIntent(intent string) *Error { e.Intent = intent; return e }

// WithSuggestion sets the suggestion and returns e.
func (e *Error) WithSuggestion(s string) *Error { e.Suggestion = s; return e }

// WithCause sets the underlying cause (never shown to the caller) and returns e.
func (e *Error) WithCause(err error) *Error { e.Err = err; return e }

// Body is the JSON object inside the AXAG envelope's "error" member.
type Body struct {
	Code    Code           `json:"code"`
	Type    Type           `json:"type"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// Envelope is the AXAG error response: {"error":{code,type,message,details}}.
type Envelope struct {
	Error Body `json:"error"`
}

// DetailAgentAction is the details key of the envelope's agent action. A
// refusal whose Details set it to a non-empty string says that instead of
// its code's AgentAction (a refusal that names a page for the person, say).
const DetailAgentAction = "agent_action"

// Envelope renders e as the AXAG error response. Details always carry
// "retryable" and "agent_action" (the code's, unless Details set their
// own); "intent", "suggestion", "violations", "retry_after" (whole seconds,
// rounded up) and "gate" appear when set.
func (e *Error) Envelope() Envelope {
	d := make(map[string]any, len(e.Details)+7)
	for k, v := range e.Details {
		d[k] = v
	}
	if e.Intent != "" {
		d["intent"] = e.Intent
	}
	if e.Suggestion != "" {
		d["suggestion"] = e.Suggestion
	}
	if len(e.Violations) > 0 {
		d["violations"] = e.Violations
	}
	if e.RetryAfter > 0 {
		d["retry_after"] = e.RetryAfterSeconds()
	}
	if e.Gate != "" {
		d["gate"] = e.Gate
	}
	d["retryable"] = e.Retryable()
	if a := e.agentAction(); a != "" {
		d["agent_action"] = a
	}
	return Envelope{Error: Body{Code: e.Code, Type: e.Type(), Message: e.Message, Details: d}}
}

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up, at least
// 1 when RetryAfter is positive (the unit of the HTTP Retry-After header).
func (e *Error) RetryAfterSeconds() int {
	if e.RetryAfter <= 0 {
		return 0
	}
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// MarshalJSON renders the AXAG envelope.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.Envelope()) }

// JSON-RPC error codes used by ToJSONRPC.
const (
	jSONRPCInvalidParams = -32602
	jSONRPCServerError   = -32000
)

// RPCError is a JSON-RPC 2.0 error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (r *RPCError) Error() string { return "jsonrpc " + strconv.Itoa(r.Code) + ": " + r.Message }

// IsParameterError reports whether the code is about the arguments themselves
// (missing, wrong type, out of range, bad enum or format, unknown, malformed),
// which JSON-RPC calls invalid params.
func (c Code) IsParameterError() bool {
	switch c {
	case CodeMissingParam, CodeInvalidType, CodeOutOfRange, CodeInvalidEnum,
		CodeInvalidFormat, CodeUnknownParam, CodeInvalidArguments:
		return true
	}
	return false
}

// ToJSONRPC maps e to a JSON-RPC error: -32602 (invalid params) for parameter
// errors, -32000 otherwise. Data is the envelope's body, so the violations sit
// in data.details.violations and, as the aggregated form of seeds/000 expects,
// in data.errors.
func (e *Error) ToJSONRPC() *RPCError {
	env := e.Envelope()
	data := map[string]any{
		"code":    env.Error.Code,
		"type":    env.Error.Type,
		"details": env.Error.Details,
	}
	if len(e.Violations) > 0 {
		data["errors"] = e.Violations
	}
	code := jSONRPCServerError
	if e.Code.IsParameterError() {
		code = jSONRPCInvalidParams
	}
	return &RPCError{Code: code, Message: e.Message, Data: data}
}

// DefaultMaxViolations is how many violations a refusal lists unless the
// enforcer is configured otherwise (axgate.WithMaxViolations): enough for an
// agent to fix a call, small enough that hostile input cannot make the
// answer (or the work of building it) grow with the input.
const DefaultMaxViolations = 20

// DetailViolationsOmitted is the details key counting the violations found
// beyond those listed.
const DetailViolationsOmitted = "violations_omitted"

// AggregateOmitted returns one error for a list of violations.
//
// Its code is the first violation's, its message names how many there are,
// and it lists them. omitted counts more violations that were found and left
// out (0 when the list is whole): the message counts all of them and says how
// many are listed; details.violations_omitted carries the number.
func AggregateOmitted(intent string, vs []Violation, omitted int) *Error {
	if len(vs) == 0 {
		return nil
	}
	msg := vs[0].Message
	if vs[0].Path != "" {
		msg = vs[0].Path + ": " + msg
	}
	if n := len(vs) + omitted; n > 1 {
		var b strings.Builder
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" invalid arguments")
		if omitted > 0 {
			b.WriteString(" (the first ")
			b.WriteString(strconv.Itoa(len(vs)))
			b.WriteString(" listed, ")
			b.WriteString(strconv.Itoa(omitted))
			b.WriteString(" more omitted)")
		}
		b.WriteString("; first: ")
		b.WriteString(msg)
		msg = b.String()
	} else {
		msg = "invalid argument " + msg
	}
	e := &Error{Code: vs[0].Code, Message: msg, Intent: intent, Violations: vs}
	if omitted > 0 {
		e.With(DetailViolationsOmitted, omitted)
	}
	return e
}

// As returns err as an *Error when it is one or wraps one.
func As(err error) (*Error, bool) {
	// An *Error itself, the common case, without stderrors.As, whose target
	// escapes to the heap on every call.
	if e, ok := err.(*Error); ok {
		return e, true
	}
	var e *Error
	if stderrors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Is reports whether err is, or wraps, an *Error with the code.
func Is(err error, code Code) bool { return stderrors.Is(err, code) }

// Text explains the refusal in a few lines of plain text for a model.
//
// The lines give the code and message, each violation, the scalar details
// in a stable order, the suggestion, when to retry and what to do next.
// Transports that hand refusals to a model as a tool result (MCP, agent
// SDKs) send it beside the JSON envelope.
func (e *Error) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Refused (%s): %s", e.Code, e.Message)
	for _, v := range e.Violations {
		path := v.Path
		if path == "" {
			path = "(arguments)"
		}
		fmt.Fprintf(&b, "\n- %s: %s", path, v.Message)
		if v.Code != "" && v.Code != e.Code {
			fmt.Fprintf(&b, " [%s]", v.Code)
		}
	}
	keys := make([]string, 0, len(e.Details))
	for k, v := range e.Details {
		switch v.(type) {
		case string, bool, int, int64, float64, json.Number:
			if k != DetailAgentAction { // the "Next step" line
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %v", k, e.Details[k])
	}
	if e.Suggestion != "" {
		b.WriteString("\nSuggestion: " + e.Suggestion)
	}
	if s := e.RetryAfterSeconds(); s > 0 {
		fmt.Fprintf(&b, "\nRetry after: %d s", s)
	}
	if a := e.agentAction(); a != "" {
		b.WriteString("\nNext step: " + a)
	}
	return b.String()
}

// Ensure returns err as an *Error when it is one (or wraps one). Anything
// else becomes a new *Error with the code and message, keeping err as its
// cause for logs, never for the caller. Adapters use it where a plain error
// (from an authenticator, say) must reach the caller as a refusal.
func Ensure(err error, code Code, message string) *Error {
	if e, ok := As(err); ok {
		return e
	}
	return New(code, message).WithCause(err)
}

// From returns err as the *Error a caller sees: itself when it is one, a
// retryable AXGATE_TOOL_FAILED when the call was cancelled or ran out of
// time, and AXGATE_INTERNAL (with a message that reveals nothing) otherwise.
func From(err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	if stderrors.Is(err, context.Canceled) || stderrors.Is(err, context.DeadlineExceeded) {
		return New(CodeToolFailed, "the call was cancelled or ran out of time").WithCause(err)
	}
	return New(CodeInternal, "the call could not be processed").WithCause(err)
}
