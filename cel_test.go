package axgate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// celManifest declares the constraints of the review that got calls past
// the chain: an optional argument read without has(), and an integer
// conversion that overflows.
const celManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "payment.send", "entity": "payment", "action_type": "write", "description": "Send a payment",
     "required_parameters": [{"name": "amount", "type": "number", "description": "Amount"}],
     "optional_parameters": [{"name": "cfo_code", "type": "string", "description": "CFO approval code"}],
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {"cfo_above_1000": "args.amount <= 1000.0 || args.cfo_code == 'CFO-OK'"}},
    {"intent": "stock.order", "entity": "stock", "action_type": "write", "description": "Order stock",
     "required_parameters": [{"name": "quantity", "type": "integer", "description": "Units"}],
     "optional_parameters": [{"name": "override", "type": "string", "description": "Supervisor override"}],
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {"at_most_100": "int(args.quantity) <= 100 || args.override == 'SUPERVISOR'"}}
  ]
}`

func celEnforcer(t *testing.T, doc string, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.ParseJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// notEvaluable asserts err is the 412 refusal of a constraint that could not
// be evaluated.
func notEvaluable(t *testing.T, err error, constraint string) *axerr.Error {
	t.Helper()
	e, ok := axerr.As(err)
	if !ok {
		t.Fatalf("want a refusal, got %v", err)
	}
	if e.Code != axerr.CodePreconditionFailed || e.Code.HTTPStatus() != 412 ||
		e.Details["reason"] != gates.ReasonConstraintNotEvaluable || e.Details["failed_constraint"] != constraint {
		t.Fatalf("refusal = %s %v, want AXAG_PRECONDITION_FAILED constraint_not_evaluable of %s", e.Code, e.Details, constraint)
	}
	return e
}

// TestConstraintBypassesRefused: each call here reached the tool before
// constraints failed closed.
func TestConstraintBypassesRefused(t *testing.T) {
	e := celEnforcer(t, celManifest)
	for _, tc := range []struct{ tool, args, constraint string }{
		// args.cfo_code is absent: "no such key" || false… CEL's || is
		// commutative over errors, and the gate skipped constraints that
		// read an absent argument.
		{"payment_send", `{"amount":5000}`, "cfo_above_1000"},
		// int(1e300) overflows, and override is absent: the gate skipped
		// the constraint.
		{"stock_order", `{"quantity":1e300}`, "at_most_100"},
		// int(1e300) overflows; error || true is true.
		{"stock_order", `{"quantity":1e300,"override":"SUPERVISOR"}`, "at_most_100"},
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			tool := &spy{}
			_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall(tc.tool, json.RawMessage(tc.args), principal))
			notEvaluable(t, err, tc.constraint)
			if tool.calls.Load() != 0 {
				t.Fatal("the tool ran")
			}
		})
	}
	// What the constraints allow still reaches the tool.
	for _, ok := range []struct{ tool, args string }{
		{"payment_send", `{"amount":500}`},
		{"payment_send", `{"amount":5000,"cfo_code":"CFO-OK"}`},
		{"stock_order", `{"quantity":100}`},
		{"stock_order", `{"quantity":500,"override":"SUPERVISOR"}`},
	} {
		tool := &spy{}
		if _, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall(ok.tool, json.RawMessage(ok.args), principal)); err != nil || tool.calls.Load() != 1 {
			t.Errorf("%s %s: %v", ok.tool, ok.args, err)
		}
	}
}
