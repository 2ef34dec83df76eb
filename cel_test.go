package axgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
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
     "constraints": {"at_most_100": "int(args.quantity) * 1000000 <= 100000000 || args.override == 'SUPERVISOR'"}}
  ]
}`

func celEnforcer(t *testing.T, doc string, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(doc))
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
		e.Details["reason"] != string(reasons.ConstraintNotEvaluable) || e.Details["failed_constraint"] != constraint {
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
		// quantity * 1000000 overflows int64 inside the expression, and
		// override is absent: the gate skipped the constraint. (The
		// issue's int(1e300) no longer reaches CEL: 1e300 is not an I-JSON
		// integer, see TestConstraintBypassInexactNumber.)
		{"stock_order", `{"quantity":9000000000000000}`, "at_most_100"},
		// The same overflow; error || true is true.
		{"stock_order", `{"quantity":9000000000000000,"override":"SUPERVISOR"}`, "at_most_100"},
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

// rolesManifest has a constraint whose cost grows with the caller's roles:
// the estimate bounds them (they come from the credential, not the
// arguments), the runtime limit holds whatever their number.
const rolesManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "report.read", "entity": "report", "action_type": "read", "description": "Read a report",
     "required_parameters": [{"name": "id", "type": "string", "description": "Report", "maxLength": 64}],
     "risk_level": "low", "idempotent": true, "scope": "global",
     "constraints": {"not_banned": "principal.roles.all(r, r != 'banned')"}}
  ]
}`

func manyRoles(n int) middleware.Principal {
	p := middleware.Principal{ID: "user-1", Roles: make([]string, n)}
	for i := range p.Roles {
		p.Roles[i] = "role-" + strconv.Itoa(i)
	}
	return p
}

// TestConstraintCostLimit: an evaluation that reaches the cost limit is
// refused, and the tool never runs.
func TestConstraintCostLimit(t *testing.T) {
	e := celEnforcer(t, rolesManifest, axgate.WithCELCostLimit(20_000))
	tool := &spy{}
	args := json.RawMessage(`{"id":"r1"}`)
	if _, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("report_read", args, manyRoles(10))); err != nil {
		t.Fatalf("a few roles: %v", err)
	}
	_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("report_read", args, manyRoles(50_000)))
	re := notEvaluable(t, err, "not_banned")
	if !errors.Is(re.Err, gate.ErrCELCostLimit) || !strings.Contains(re.Message, "cost limit") {
		t.Fatalf("cause = %v, message = %q", re.Err, re.Message)
	}
	if tool.calls.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", tool.calls.Load())
	}
}

// TestConstraintInterruptedByContext: an evaluation stops when the call's
// context ends, and the call is refused.
func TestConstraintInterruptedByContext(t *testing.T) {
	e := celEnforcer(t, rolesManifest)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tool := &spy{}
	_, err := e.Wrap(tool).Invoke(ctx, middleware.NewCall("report_read", json.RawMessage(`{"id":"r1"}`), manyRoles(5_000)))
	re := notEvaluable(t, err, "not_banned")
	if !errors.Is(re.Err, context.Canceled) {
		t.Fatalf("cause = %v, want context.Canceled", re.Err)
	}
	if tool.calls.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

// TestNewRefusesCostlyConstraint: a constraint whose worst case, given the
// declared bounds, exceeds the cost limit is refused by New, which names it;
// declaring maxItems makes it acceptable. Without the bound a uniqueness
// check over an 8,000-item array took 17.8 s of CPU per call.
func TestNewRefusesCostlyConstraint(t *testing.T) {
	// The reference form, whose parameters declare items.
	doc := func(bounds string) string {
		return `{"version": "1.0.0", "entities": [{"name": "cart", "actions": [
    {"intent": "cart.view", "action_type": "read", "description": "View the cart", "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "cart.fill", "action_type": "write", "description": "Fill a cart", "risk_level": "low", "idempotent": false, "scope": "global",
     "parameters": {"skus": {"type": "array", "required": true, "description": "SKUs"` + bounds + `}},
     "constraints": {"small": "size(args.skus) <= 100", "unique": "args.skus.all(s, args.skus.filter(t, t == s).size() == 1)"}}]}]}`
	}
	m, err := manifest.Parse([]byte(doc("")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = axgate.New(m)
	if err == nil {
		t.Fatal("New accepted a constraint of unbounded cost")
	}
	var ce *gate.CELCostError
	if !strings.Contains(err.Error(), "/entities/0/actions/1/constraints/unique") || !errors.As(err, &ce) || ce.Limit != gate.DefaultCELCostLimit {
		t.Fatalf("error = %v", err)
	}
	if strings.Contains(err.Error(), "constraints/small") {
		t.Fatalf("error names a cheap constraint: %v", err)
	}
	e := celEnforcer(t, doc(`, "maxItems": 100, "items": {"type": "string", "maxLength": 32}`))
	tool := &spy{}
	_, err = e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("cart_fill", json.RawMessage(`{"skus":["a","b","a"]}`), principal))
	if ae, ok := axerr.As(err); !ok || ae.Details["failed_constraint"] != "unique" {
		t.Fatalf("duplicate skus: %v", err)
	}
	if _, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("cart_fill", json.RawMessage(`{"skus":["a","b"]}`), principal)); err != nil {
		t.Fatal(err)
	}
	// maxItems is enforced on the arguments, so the estimate holds.
	long := `{"skus":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 101), ",") + `]}`
	_, err = e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("cart_fill", json.RawMessage(long), principal))
	if ae, ok := axerr.As(err); !ok || ae.Code == axerr.CodePreconditionFailed {
		t.Fatalf("101 skus: %v, want a parameter refusal", err)
	}
}

// TestConstraintBypassInexactNumber: the int(args.quantity) <= 100
// with {"quantity":1e300} is refused before any gate looks at it, because
// 1e300 is an integer a double holds only approximately (I-JSON); the tool
// never runs.
func TestConstraintBypassInexactNumber(t *testing.T) {
	e := celEnforcer(t, celManifest)
	for _, args := range []string{`{"quantity":1e300}`, `{"quantity":1e300,"override":"SUPERVISOR"}`} {
		tool := &spy{}
		_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("stock_order", json.RawMessage(args), principal))
		ae, ok := axerr.As(err)
		if !ok || ae.Code != axerr.CodeInvalidType || ae.Details["reason"] != string(reasons.NumberNotInteroperable) {
			t.Fatalf("%s: %v, want AXAG_INVALID_TYPE number_not_interoperable", args, err)
		}
		if tool.calls.Load() != 0 {
			t.Fatalf("%s: the tool ran", args)
		}
	}
}
