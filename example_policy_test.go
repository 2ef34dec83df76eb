package axgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// A relational constraint: the manifest says check_out > check_in, and the
// enforcer refuses a booking whose dates are reversed before the tool runs.
func Example_constraint() {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [{
	  "intent": "booking.create", "entity": "booking", "action_type": "write",
	  "description": "Book a room", "risk_level": "low", "idempotent": true, "scope": "global",
	  "required_parameters": [
	    {"name": "check_in", "type": "string", "format": "date", "description": "Arrival"},
	    {"name": "check_out", "type": "string", "format": "date", "description": "Departure"}],
	  "constraints": {"dates_ordered": "check_out > check_in"}}]}`))
	if err != nil {
		panic(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		panic(err)
	}
	book := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "booked"}, nil
	}))
	for _, args := range []string{
		`{"check_in": "2026-05-01", "check_out": "2026-05-03"}`,
		`{"check_in": "2026-05-03", "check_out": "2026-05-01"}`,
	} {
		res, err := book.Invoke(context.Background(), middleware.NewCall("booking_create", json.RawMessage(args), middleware.Principal{ID: "u-1"}))
		if e, ok := axerr.As(err); ok {
			fmt.Println(e.HTTPStatus(), e.Code, e.Details["failed_constraint"])
			continue
		}
		fmt.Println(res.Value)
	}
	// Output:
	// booked
	// 412 AXAG_PRECONDITION_FAILED dates_ordered
}

// One call's postcondition makes another's precondition true. cart.validate
// declares the postcondition cart_validated and order.place the precondition
// cart_validated; the host binds the name, with WithPrecondition and
// WithPostcondition, to one check of its own state. The check confirms, right after cart.validate ran, that the
// tool recorded the cart, and lets order.place through afterwards.
func ExampleWithPostcondition() {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "cart.validate", "entity": "cart", "action_type": "write", "description": "Validate a cart",
	   "risk_level": "low", "idempotent": true, "scope": "user",
	   "required_parameters": [{"name": "cart_id", "type": "string", "description": "Cart"}],
	   "postconditions": ["cart_validated"]},
	  {"intent": "order.place", "entity": "order", "action_type": "write", "description": "Place an order",
	   "risk_level": "medium", "idempotent": true, "scope": "user",
	   "required_parameters": [{"name": "cart_id", "type": "string", "description": "Cart"}],
	   "preconditions": ["cart_validated"]}]}`))
	if err != nil {
		panic(err)
	}

	// The host's state, written by its cart.validate tool.
	var mu sync.Mutex
	validated := map[string]bool{}
	cartValidated := func(_ context.Context, call *middleware.Call) error {
		args, err := call.Args()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !validated[args["cart_id"].(string)] {
			return errors.New("cart not validated")
		}
		return nil
	}

	enf, err := axgate.New(m, axgate.WithPrecondition("cart_validated", cartValidated), axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
		return cartValidated(ctx, call)
	}))
	if err != nil {
		panic(err)
	}
	validate := enf.Wrap(middleware.InvokerFunc(func(_ context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args()
		mu.Lock()
		validated[args["cart_id"].(string)] = true
		mu.Unlock()
		return middleware.Result{Value: "valid"}, nil
	}))
	place := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "order o-1 placed"}, nil
	}))

	ctx, caller := context.Background(), middleware.Principal{ID: "u-1"}
	args := json.RawMessage(`{"cart_id": "c-1"}`)
	if _, err := place.Invoke(ctx, middleware.NewCall("order_place", args, caller)); err != nil {
		e, _ := axerr.As(err)
		fmt.Println(e.Code, e.Suggestion)
	}
	if _, err := validate.Invoke(ctx, middleware.NewCall("cart_validate", args, caller)); err != nil {
		panic(err)
	}
	res, err := place.Invoke(ctx, middleware.NewCall("order_place", args, caller))
	fmt.Println(res.Value, err)
	// Output:
	// AXAG_PRECONDITION_FAILED Call cart.validate first (its postconditions produce "cart_validated"), then call again.
	// order o-1 placed <nil>
}

// A caller's granted scopes narrow what it may call: here a token that
// grants only "read" cannot place an order. Tenant-scoped actions keep a
// caller inside its tenant, and the refusal never names the other tenant.
func ExampleWithAccess() {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "invoice.list", "entity": "invoice", "action_type": "read", "description": "List invoices",
	   "risk_level": "low", "idempotent": true, "scope": "tenant",
	   "optional_parameters": [{"name": "workspace", "type": "string", "description": "Workspace"}]},
	  {"intent": "order.place", "entity": "order", "action_type": "write", "description": "Place an order",
	   "risk_level": "low", "idempotent": true, "scope": "global"}]}`))
	if err != nil {
		panic(err)
	}
	enf, err := axgate.New(m, axgate.WithAccess(gates.AccessOptions{TenantArgs: []string{"workspace"}}))
	if err != nil {
		panic(err)
	}
	tool := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}))
	reader := middleware.Principal{ID: "u-1", Tenant: "acme", Scopes: []string{"read"}}
	for _, c := range []struct{ tool, args string }{
		{"invoice_list", `{"workspace": "acme"}`},
		{"invoice_list", `{"workspace": "globex"}`},
		{"order_place", `{}`},
	} {
		res, err := tool.Invoke(context.Background(), middleware.NewCall(c.tool, json.RawMessage(c.args), reader))
		if e, ok := axerr.As(err); ok {
			fmt.Println(e.Code, e.Message)
			continue
		}
		fmt.Println(res.Value)
	}
	// Output:
	// ok
	// AXAG_TENANT_BOUNDARY argument workspace names a tenant other than the caller's
	// AXAG_SCOPE_VIOLATION the caller's granted scopes do not include order.place
}
