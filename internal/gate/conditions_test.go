package gate_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

const conditionManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "cart.validate", "entity": "cart", "action_type": "write", "description": "Validate a cart",
     "required_parameters": [{"name": "cart_id", "type": "string", "description": "Cart"}],
     "risk_level": "low", "idempotent": true, "scope": "user",
     "postconditions": ["cart_validated"],
     "output_schema": {"type": "object", "required": ["valid"], "properties": {"valid": {"type": "boolean"}, "total": {"type": "number", "minimum": 0}}}},
    {"intent": "order.place", "entity": "order", "action_type": "write", "description": "Place an order",
     "required_parameters": [{"name": "cart_id", "type": "string", "description": "Cart"}],
     "optional_parameters": [{"name": "coupon", "type": "string", "description": "Coupon"}],
     "risk_level": "high", "idempotent": false, "scope": "user",
     "preconditions": ["cart_validated", "coupon_valid"],
     "postconditions": ["order_created"]},
    {"intent": "order.cancel", "entity": "order", "action_type": "write", "description": "Cancel",
     "risk_level": "medium", "idempotent": true, "scope": "user",
     "preconditions": ["order_open"]}
  ]
}`

func TestPreconditionsUnboundRefused(t *testing.T) {
	m := mustParse(t, conditionManifest)
	_, err := gate.NewPreconditions(m, map[string]gate.Precondition{"coupon_valid": {Expr: "true"}}, false)
	var ue *gate.UnboundError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want *UnboundError", err)
	}
	want := map[string][]string{"cart_validated": {"/actions/1/preconditions/0"}, "order_open": {"/actions/2/preconditions/0"}}
	if !reflect.DeepEqual(ue.Names, want) {
		t.Errorf("unbound = %v, want %v", ue.Names, want)
	}
	if !strings.Contains(err.Error(), `"cart_validated" (/actions/1/preconditions/0)`) {
		t.Errorf("message does not list the names with their paths: %v", err)
	}
}

func TestPreconditionsUnboundAllowedWarns(t *testing.T) {
	m := mustParse(t, conditionManifest)
	g, err := gate.NewPreconditions(m, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c := call(t, m, "order.place", `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"})
	if err := g.Check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if len(c.Facts.Warnings) != 2 || !strings.Contains(c.Facts.Warnings[0], `"cart_validated"`) {
		t.Errorf("warnings = %q", c.Facts.Warnings)
	}
	c = call(t, m, "order.place", `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"})
	c.SetCheckOnly(true)
	_ = g.Check(context.Background(), c)
	if len(c.Facts.Warnings) != 0 {
		t.Errorf("a check-only call recorded warnings: %q", c.Facts.Warnings)
	}
}

func TestPreconditions(t *testing.T) {
	m := mustParse(t, conditionManifest)
	validated := map[string]bool{"c-ok": true}
	bound := map[string]gate.Precondition{
		"cart_validated": {Check: func(ctx context.Context, call *middleware.Call) error {
			args, err := call.Args()
			if err != nil {
				return err
			}
			id, _ := args["cart_id"].(string)
			switch {
			case id == "c-store-down":
				return gate.StoreUnavailable(call.Intent(), "the cart store", errors.New("dial tcp 10.0.0.7:5432: refused"))
			case !validated[id]:
				return errors.New("cart c-1 row 77 not validated") // internal detail: must not reach the caller
			}
			return nil
		}},
		"coupon_valid": {Expr: `!has(args.coupon) || coupon.startsWith("SAVE")`},
		"order_open": {Check: func(context.Context, *middleware.Call) error {
			return gate.PreconditionFailed("", "order_open", "the order has shipped")
		}},
	}
	g, err := gate.NewPreconditions(m, bound, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		intent  string
		args    string
		code    axerr.Code
		message string
		details map[string]any
	}{
		{name: "all hold", intent: "order.place", args: `{"cart_id":"c-ok"}`},
		{name: "expression holds", intent: "order.place", args: `{"cart_id":"c-ok","coupon":"SAVE10"}`},
		{name: "go checker fails", intent: "order.place", args: `{"cart_id":"c-new"}`, code: axerr.CodePreconditionFailed,
			message: "precondition not met: cart_validated",
			details: map[string]any{"failed_precondition": "cart_validated", "produced_by": []any{"cart.validate"},
				"suggestion": `Call cart.validate first (its postconditions produce "cart_validated"), then call again.`}},
		{name: "expression fails", intent: "order.place", args: `{"cart_id":"c-ok","coupon":"FREE"}`, code: axerr.CodePreconditionFailed,
			details: map[string]any{"failed_precondition": "coupon_valid", "suggestion": `Bring about "coupon_valid", then call again.`}},
		{name: "checker's own refusal keeps its message", intent: "order.cancel", args: `{}`, code: axerr.CodePreconditionFailed,
			message: "the order has shipped", details: map[string]any{"failed_precondition": "order_open", "intent": "order.cancel"}},
		{name: "checker's store fails: 503", intent: "order.place", args: `{"cart_id":"c-store-down"}`, code: axerr.CodeStoreUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Check(context.Background(), call(t, m, tt.intent, tt.args, middleware.Principal{ID: "alice"}))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			d := refusal(t, err, tt.code, tt.code.HTTPStatus())
			for k, want := range tt.details {
				if !reflect.DeepEqual(d[k], want) {
					t.Errorf("details[%s] = %#v, want %#v", k, d[k], want)
				}
			}
			e, _ := axerr.As(err)
			if tt.message != "" && e.Message != tt.message {
				t.Errorf("message = %q, want %q", e.Message, tt.message)
			}
			if raw, _ := e.MarshalJSON(); strings.Contains(string(raw), "row 77") || strings.Contains(string(raw), "10.0.0.7") {
				t.Errorf("refusal shows a checker's internal error: %s", raw)
			}
		})
	}
}

func TestPreconditionsBadBinding(t *testing.T) {
	m := mustParse(t, conditionManifest)
	_, err := gate.NewPreconditions(m, map[string]gate.Precondition{
		"cart_validated": {Expr: "cart_idd != ''"},
		"coupon_valid":   {Expr: "true", Check: func(context.Context, *middleware.Call) error { return nil }},
		"order_open":     {Expr: "true"},
	}, false)
	if err == nil || !strings.Contains(err.Error(), "/actions/1/preconditions/0") || !strings.Contains(err.Error(), "both a checker and an expression") {
		t.Errorf("err = %v", err)
	}
}

type cartResult struct {
	Valid bool    `json:"valid"`
	Total float64 `json:"total"`
}

func TestPostconditions(t *testing.T) {
	m := mustParse(t, conditionManifest)
	g, err := gate.NewPostconditions(m, map[string]gate.Postcondition{
		"cart_validated": {Expr: "result.valid == true && result.total >= 0"},
		"order_created": {Check: func(_ context.Context, _ *middleware.Call, res middleware.Result) error {
			if v, _ := res.Value.(map[string]any); v["order_id"] == nil {
				return errors.New("no order id in /var/lib/orders")
			}
			return nil
		}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	toolErr := axerr.New(axerr.CodeToolFailed, "boom")
	tests := []struct {
		name    string
		intent  string
		value   any
		toolErr error
		code    axerr.Code
		details map[string]any
		paths   []string
	}{
		{name: "struct result holds", intent: "cart.validate", value: cartResult{Valid: true, Total: 12.5}},
		{name: "map result holds", intent: "cart.validate", value: map[string]any{"valid": true, "total": 0}},
		{name: "expression reads an absent member: refused", intent: "cart.validate", value: map[string]any{"valid": true}, code: axerr.CodePostconditionFailed,
			details: map[string]any{"reason": "postcondition_not_evaluable", "failed_postcondition": "cart_validated"}},
		{name: "output schema violated", intent: "cart.validate", value: map[string]any{"total": -1, "valid": "yes"}, code: axerr.CodePostconditionFailed,
			details: map[string]any{"reason": "output_schema"}, paths: []string{"/total", "/valid"}},
		{name: "output schema: missing member", intent: "cart.validate", value: map[string]any{}, code: axerr.CodePostconditionFailed,
			paths: []string{"/valid"}},
		{name: "expression fails", intent: "cart.validate", value: cartResult{Valid: false}, code: axerr.CodePostconditionFailed,
			details: map[string]any{"reason": "postcondition_failed", "failed_postcondition": "cart_validated"}},
		{name: "result not JSON", intent: "cart.validate", value: map[string]any{"valid": make(chan int)}, code: axerr.CodePostconditionFailed,
			details: map[string]any{"reason": "result_not_json"}},
		{name: "go checker holds", intent: "order.place", value: map[string]any{"order_id": "o-1"}},
		{name: "go checker fails", intent: "order.place", value: map[string]any{}, code: axerr.CodePostconditionFailed,
			details: map[string]any{"failed_postcondition": "order_created", "reason": "postcondition_failed"}},
		{name: "tool error passes through", intent: "order.place", toolErr: toolErr, code: axerr.CodeToolFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
				return middleware.Result{Value: tt.value}, tt.toolErr
			})
			inv := middleware.Build(tool, nil, g.Stage())
			res, err := inv.Invoke(context.Background(), call(t, m, tt.intent, `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"}))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !reflect.DeepEqual(res.Value, tt.value) {
					t.Errorf("result = %#v, want the tool's", res.Value)
				}
				return
			}
			d := refusal(t, err, tt.code, tt.code.HTTPStatus())
			if tt.code == axerr.CodePostconditionFailed {
				if res.Value != nil {
					t.Errorf("the caller got the result with the refusal: %#v", res.Value)
				}
				if d["gate"] != gate.StagePostconditions {
					t.Errorf("gate = %v", d["gate"])
				}
			}
			for k, want := range tt.details {
				if !reflect.DeepEqual(d[k], want) {
					t.Errorf("details[%s] = %#v, want %#v", k, d[k], want)
				}
			}
			e, _ := axerr.As(err)
			var paths []string
			for _, v := range e.Violations {
				paths = append(paths, v.Path)
			}
			if tt.paths != nil && !reflect.DeepEqual(paths, tt.paths) {
				t.Errorf("violation paths = %q, want %q", paths, tt.paths)
			}
			if strings.Contains(e.Error(), "/var/lib") {
				t.Errorf("refusal shows a checker's internal error: %v", e)
			}
		})
	}
}

func TestPostconditionsUnbound(t *testing.T) {
	m := mustParse(t, conditionManifest)
	_, err := gate.NewPostconditions(m, nil, false)
	var ue *gate.UnboundError
	if !errors.As(err, &ue) || ue.Kind != "postcondition" || len(ue.Names) != 2 {
		t.Fatalf("err = %v", err)
	}
	g, err := gate.NewPostconditions(m, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c := call(t, m, "order.place", `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"})
	if err := g.Check(context.Background(), c, middleware.Result{Value: 1}); err != nil {
		t.Fatal(err)
	}
	if len(c.Facts.Warnings) != 1 || !strings.Contains(c.Facts.Warnings[0], `"order_created"`) {
		t.Errorf("warnings = %q", c.Facts.Warnings)
	}
}

// errShopClosed is a refusal a host keeps at package level and returns from
// several checkers, as Go code commonly does with sentinel errors.
var errShopClosed = axerr.New(axerr.CodePreconditionFailed, "the shop is closed")

// errNotRecorded is the same for postconditions.
var errNotRecorded = axerr.New(axerr.CodePostconditionFailed, "the ledger did not record the call")

// TestConditionsLeaveSharedErrorsAlone: a checker's package-level refusal,
// returned for two actions by goroutines at once, comes back to each caller
// with that caller's intent and condition, and is itself never changed (run
// with -race: annotating it in place raced on its details).
func TestConditionsLeaveSharedErrorsAlone(t *testing.T) {
	m := mustParse(t, conditionManifest)
	closed := func(context.Context, *middleware.Call) error { return errShopClosed }
	pre, err := gate.NewPreconditions(m, map[string]gate.Precondition{
		"cart_validated": {Check: closed}, "coupon_valid": {Expr: "true"}, "order_open": {Check: closed},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	notRecorded := func(context.Context, *middleware.Call, middleware.Result) error { return errNotRecorded }
	post, err := gate.NewPostconditions(m, map[string]gate.Postcondition{
		"cart_validated": {Check: notRecorded}, "order_created": {Check: notRecorded},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	preCases := []struct{ intent, condition string }{{"order.place", "cart_validated"}, {"order.cancel", "order_open"}}
	postCases := []struct{ intent, condition string }{{"cart.validate", "cart_validated"}, {"order.place", "order_created"}}
	var wg sync.WaitGroup
	for range 8 {
		for i := range 2 {
			wg.Go(func() {
				c := preCases[i]
				err := pre.Check(context.Background(), call(t, m, c.intent, `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"}))
				e, ok := axerr.As(err)
				if !ok || e.Code != axerr.CodePreconditionFailed || e.Message != "the shop is closed" {
					t.Errorf("%s: err = %v", c.intent, err)
					return
				}
				if e.Intent != c.intent || e.Details["failed_precondition"] != c.condition || e.Suggestion == "" {
					t.Errorf("%s: refusal names intent %q, precondition %v, suggestion %q", c.intent, e.Intent, e.Details["failed_precondition"], e.Suggestion)
				}
			})
			wg.Go(func() {
				c := postCases[i]
				res := middleware.Result{Value: map[string]any{"valid": true, "total": 1}}
				err := post.Check(context.Background(), call(t, m, c.intent, `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"}), res)
				e, ok := axerr.As(err)
				if !ok || e.Code != axerr.CodePostconditionFailed {
					t.Errorf("%s: err = %v", c.intent, err)
					return
				}
				if e.Intent != c.intent || e.Details["failed_postcondition"] != c.condition {
					t.Errorf("%s: refusal names intent %q, postcondition %v", c.intent, e.Intent, e.Details["failed_postcondition"])
				}
			})
		}
	}
	wg.Wait()
	for _, shared := range []*axerr.Error{errShopClosed, errNotRecorded} {
		if shared.Intent != "" || shared.Suggestion != "" || shared.Gate != "" || len(shared.Details) != 0 {
			t.Errorf("the shared error was changed: intent %q, suggestion %q, gate %q, details %v", shared.Intent, shared.Suggestion, shared.Gate, shared.Details)
		}
	}
}

// TestPostconditionsSkipFailedTool: a tool that fails, even with a result
// beside its error, is answered with its own error, unchanged; no
// postcondition or output schema is checked, since there is no result to
// vouch for.
func TestPostconditionsSkipFailedTool(t *testing.T) {
	m := mustParse(t, conditionManifest)
	var checked atomic.Int32
	g, err := gate.NewPostconditions(m, map[string]gate.Postcondition{
		"cart_validated": {Check: func(context.Context, *middleware.Call, middleware.Result) error {
			checked.Add(1)
			return errors.New("not validated")
		}},
		"order_created": {Expr: "false"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, toolErr := range []error{errors.New("disk full"), axerr.New(axerr.CodeToolFailed, "boom"), context.Canceled} {
		for _, intent := range []string{"cart.validate", "order.place"} {
			partial := map[string]any{"valid": "half"} // violates cart.validate's output_schema too
			tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
				return middleware.Result{Value: partial}, toolErr
			})
			res, err := g.Stage().Interceptor(context.Background(), call(t, m, intent, `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"}), tool)
			if err != toolErr {
				t.Errorf("%s, tool error %v: got %v", intent, toolErr, err)
			}
			if !reflect.DeepEqual(res.Value, partial) {
				t.Errorf("%s: the tool's result beside its error was dropped: %#v", intent, res.Value)
			}
		}
	}
	if n := checked.Load(); n != 0 {
		t.Errorf("a postcondition was checked %d times on a failed tool", n)
	}
}

// TestConditionExpressionsFailClosed: an error anywhere in the evaluation of
// a precondition or postcondition expression refuses the call, also one that
// || absorbs (CEL: error || true is true), such as reading what is absent.
func TestConditionExpressionsFailClosed(t *testing.T) {
	m := mustParse(t, conditionManifest)
	pre, err := gate.NewPreconditions(m, map[string]gate.Precondition{
		"cart_validated": {Expr: "true"},
		"coupon_valid":   {Expr: "args.coupon.startsWith('SAVE') || args.cart_id == 'c-vip'"},
		"order_open":     {Expr: "true"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	err = pre.Check(context.Background(), call(t, m, "order.place", `{"cart_id":"c-vip"}`, middleware.Principal{ID: "alice"}))
	d := refusal(t, err, axerr.CodePreconditionFailed, 412)
	if d["reason"] != string(reasons.PreconditionNotEvaluable) || d["failed_precondition"] != "coupon_valid" {
		t.Fatalf("details = %v", d)
	}
	if err := pre.Check(context.Background(), call(t, m, "order.place", `{"cart_id":"c-vip","coupon":"FREE"}`, middleware.Principal{ID: "alice"})); err != nil {
		t.Fatalf("coupon given: %v", err)
	}

	post, err := gate.NewPostconditions(m, map[string]gate.Postcondition{
		"cart_validated": {Expr: "result.total >= 0.0 || result.valid == true"},
		"order_created":  {Expr: "true"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: map[string]any{"valid": true}}, nil
	})
	_, err = middleware.Build(tool, nil, post.Stage()).Invoke(context.Background(), call(t, m, "cart.validate", `{"cart_id":"c1"}`, middleware.Principal{ID: "alice"}))
	d = refusal(t, err, axerr.CodePostconditionFailed, axerr.CodePostconditionFailed.HTTPStatus())
	if d["reason"] != string(reasons.PostconditionNotEvaluable) || d["failed_postcondition"] != "cart_validated" {
		t.Fatalf("details = %v", d)
	}
}
