package errors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
)

func TestCodeTable(t *testing.T) {
	want := map[axerr.Code]int{
		axerr.CodeMissingParam: 400, axerr.CodeInvalidType: 400, axerr.CodeOutOfRange: 400,
		axerr.CodeInvalidEnum: 400, axerr.CodeInvalidFormat: 400, axerr.CodePreconditionFailed: 412,
		axerr.CodeConfirmationMissing: 428, axerr.CodeApprovalMissing: 428, axerr.CodeApprovalInvalid: 403,
		axerr.CodeScopeViolation: 403, axerr.CodeTenantBoundary: 403, axerr.CodeRoleInsufficient: 403,
		axerr.CodeIntentNotFound: 404, axerr.CodeVersionMismatch: 409, axerr.CodeRateLimited: 429,
		axerr.CodeUnauthenticated: 401, axerr.CodePayloadTooLarge: 413, axerr.CodeStoreUnavailable: 503,
		axerr.CodeUnsupportedMediaType: 415, axerr.CodeMethodNotAllowed: 405,
		axerr.CodeToolChanged: 409, axerr.CodeToolFailed: 502, axerr.CodePostconditionFailed: 502, axerr.CodeIdempotencyKeyReused: 422,
	}
	for code, status := range want {
		if got := code.HTTPStatus(); got != status {
			t.Errorf("%s: status %d, want %d", code, got, status)
		}
	}
	for _, c := range axerr.Codes() {
		if c.Type() == axerr.TypeInternal && c != axerr.CodeInternal {
			t.Errorf("%s has no entry in the table", c)
		}
		if c.AgentAction() == "" {
			t.Errorf("%s has no agent action", c)
		}
	}
	if axerr.CodeToolChanged.Type() != axerr.TypeConflict || axerr.CodeToolChanged.Retryable() {
		t.Error("AXGATE_TOOL_CHANGED must be a conflict an agent cannot retry: only a new pin clears it")
	}
	if axerr.CodeMissingParam.Type() != axerr.TypeParameter || axerr.CodeOutOfRange.Type() != axerr.TypeConstraint ||
		axerr.CodeConfirmationMissing.Type() != axerr.TypeSafety || axerr.CodeTenantBoundary.Type() != axerr.TypeSecurity ||
		axerr.CodeRoleInsufficient.Type() != axerr.TypeAuthorization || axerr.CodePreconditionFailed.Type() != axerr.TypePrecondition {
		t.Error("categories differ from the AXAG error table")
	}
}

func TestIsAndAs(t *testing.T) {
	e := axerr.New(axerr.CodeRateLimited, "slow down")
	wrapped := fmt.Errorf("gate: %w", e)
	if !errors.Is(wrapped, axerr.CodeRateLimited) {
		t.Error("errors.Is(code) failed through a wrap")
	}
	if !errors.Is(wrapped, axerr.New(axerr.CodeRateLimited, "other text")) {
		t.Error("errors.Is(*Error with same code) failed")
	}
	if errors.Is(wrapped, axerr.CodeScopeViolation) {
		t.Error("errors.Is matched another code")
	}
	got, ok := axerr.As(wrapped)
	if !ok || got != e {
		t.Error("As did not find the *Error")
	}
	cause := errors.New("redis: connection refused")
	se := axerr.New(axerr.CodeStoreUnavailable, "x").WithCause(cause)
	if !errors.Is(se, cause) {
		t.Error("cause not reachable with errors.Is")
	}
}

func TestEnvelope(t *testing.T) {
	e := axerr.AggregateOmitted("order.place", []axerr.Violation{
		{Path: "/cart_id", Message: "missing properties: 'cart_id'", Keyword: "required", Code: axerr.CodeMissingParam},
		{Path: "/notes", Message: "expected string, but got number", Keyword: "type", Code: axerr.CodeInvalidType},
	}, 0)
	e.Suggestion = "Add /cart_id."
	e.RetryAfter = 1500 * time.Millisecond
	e.Err = errors.New("secret internal detail")
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Type    string         `json:"type"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Code != "AXAG_MISSING_PARAM" || env.Error.Type != "parameter_error" {
		t.Errorf("envelope = %s", data)
	}
	d := env.Error.Details
	if d["intent"] != "order.place" || d["suggestion"] != "Add /cart_id." || d["retry_after"] != 2.0 || d["retryable"] != true {
		t.Errorf("details = %v", d)
	}
	if vs := d["violations"].([]any); len(vs) != 2 {
		t.Errorf("violations = %v", vs)
	}
	if strings.Contains(string(data), "secret internal detail") {
		t.Error("the cause leaked into the envelope")
	}

	rpc := e.ToJSONRPC()
	if rpc.Code != -32602 {
		t.Errorf("JSON-RPC code = %d, want -32602", rpc.Code)
	}
	if errs := rpc.Data.(map[string]any)["errors"].([]axerr.Violation); len(errs) != 2 {
		t.Errorf("data.errors = %v", errs)
	}
	if axerr.New(axerr.CodeApprovalMissing, "x").ToJSONRPC().Code != -32000 {
		t.Error("non-parameter error mapped to invalid params")
	}
	if axerr.CodeConfirmationMissing.HTTPStatus() != http.StatusPreconditionRequired {
		t.Error("428 expected")
	}
}

func ExampleError_Envelope() {
	e := axerr.New(axerr.CodeIntentNotFound, `no tool named "order_plase"`).WithSuggestion("Call one of: order_place")
	data, _ := json.Marshal(e.Envelope().Error.Code)
	fmt.Println(string(data), e.HTTPStatus(), e.Retryable())
	// Output: "AXAG_INTENT_NOT_FOUND" 404 false
}

func TestText(t *testing.T) {
	e := axerr.AggregateOmitted("order.place", []axerr.Violation{
		{Path: "/cart_id", Message: "missing properties: 'cart_id'", Keyword: "required", Code: axerr.CodeMissingParam},
		{Path: "/notes", Message: "expected string, but got number", Keyword: "type", Code: axerr.CodeInvalidType},
	}, 0).With("reason", "bad_args").WithSuggestion("Add /cart_id.")
	e.RetryAfter = 2 * time.Second
	want := "Refused (AXAG_MISSING_PARAM): 2 invalid arguments; first: /cart_id: missing properties: 'cart_id'\n" +
		"- /cart_id: missing properties: 'cart_id'\n" +
		"- /notes: expected string, but got number [AXAG_INVALID_TYPE]\n" +
		"reason: bad_args\n" +
		"Suggestion: Add /cart_id.\n" +
		"Retry after: 2 s\n" +
		"Next step: Add the missing parameter and call again."
	if got := e.Text(); got != want {
		t.Fatalf("Text() =\n%s\nwant\n%s", got, want)
	}
}

func TestEnsureAndFrom(t *testing.T) {
	own := axerr.New(axerr.CodeScopeViolation, "no")
	if axerr.Ensure(fmt.Errorf("wrapped: %w", own), axerr.CodeUnauthenticated, "x") != own {
		t.Error("Ensure did not return the wrapped *Error")
	}
	plain := errors.New("jwt: signature invalid")
	e := axerr.Ensure(plain, axerr.CodeUnauthenticated, "the caller is not authenticated")
	if e.Code != axerr.CodeUnauthenticated || !errors.Is(e, plain) || strings.Contains(e.Message, "signature") {
		t.Errorf("Ensure = %+v", e)
	}
	if axerr.From(context.DeadlineExceeded).Code != axerr.CodeToolFailed {
		t.Error("a deadline is not a tool failure")
	}
	if f := axerr.From(plain); f.Code != axerr.CodeInternal || strings.Contains(f.Message, "jwt") {
		t.Errorf("From = %+v", f)
	}
}

func TestAggregateOmitted(t *testing.T) {
	vs := []axerr.Violation{{Path: "/a", Message: "additionalProperties 'a' not allowed", Keyword: "additionalProperties", Code: axerr.CodeUnknownParam}}
	e := axerr.AggregateOmitted("t.x", vs, 89999)
	if e.Message != "90000 invalid arguments (the first 1 listed, 89999 more omitted); first: /a: additionalProperties 'a' not allowed" {
		t.Errorf("message = %q", e.Message)
	}
	d := e.Envelope().Error.Details
	if d[axerr.DetailViolationsOmitted] != 89999 || len(d["violations"].([]axerr.Violation)) != 1 {
		t.Errorf("details = %v", d)
	}
	if !strings.Contains(e.Text(), "violations_omitted: 89999") {
		t.Errorf("text = %q", e.Text())
	}
	if e := axerr.AggregateOmitted("t.x", vs, 0); e.Message != "invalid argument /a: additionalProperties 'a' not allowed" || e.Details != nil {
		t.Errorf("nothing omitted: %q %v", e.Message, e.Details)
	}
}

// TestWithRetryable: a refusal can say, for itself, that calling again will
// not help (or will): the envelope, the text and Retryable follow it, and a
// retryable code marked not retryable no longer tells the agent to try again
// later; the code's own answer is unchanged for other refusals.
func TestWithRetryable(t *testing.T) {
	e := axerr.New(axerr.CodeToolFailed, "ENOENT: no such file or directory").WithRetryable(false)
	d := e.Envelope().Error.Details
	if e.Retryable() || d["retryable"] != false {
		t.Errorf("Retryable %v, envelope retryable %v; want false", e.Retryable(), d["retryable"])
	}
	if a, _ := d["agent_action"].(string); strings.Contains(a, "try again") || !strings.Contains(a, "Do not call again with the same arguments") {
		t.Errorf("agent_action %q", a)
	}
	if txt := e.Text(); strings.Contains(txt, "try again later") || !strings.Contains(txt, "Do not call again") {
		t.Errorf("text:\n%s", txt)
	}
	c := e.Clone()
	if c.Retryable() {
		t.Error("a clone lost WithRetryable(false)")
	}
	if !axerr.New(axerr.CodeToolFailed, "busy").Retryable() {
		t.Error("AXGATE_TOOL_FAILED is retryable by its code")
	}
	if yes := axerr.New(axerr.CodeToolChanged, "x").WithRetryable(true); !yes.Retryable() || yes.Envelope().Error.Details["agent_action"] != axerr.CodeToolChanged.AgentAction() {
		t.Errorf("WithRetryable(true): %v %v", yes.Retryable(), yes.Envelope().Error.Details["agent_action"])
	}
}
