package axgate_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// A host whose UI asked the person issues a confirmation token bound to the
// exact call; the token lets that call through once.
func ExampleEnforcer_IssueConfirmation() {
	m, _ := manifest.Parse([]byte(`{"version":"1.0.0","actions":[{
	  "intent":"order.refund","entity":"order","action_type":"write","description":"Refund an order",
	  "required_parameters":[{"name":"order_id","type":"string"},{"name":"amount","type":"number"}],
	  "risk_level":"high","confirmation_message":"Refund {{amount}} for order {{order_id}}?"}]}`))
	e, _ := axgate.New(m) // no key configured: an ephemeral Ed25519 key signs and verifies
	defer e.Close()

	ctx := context.Background()
	alice := middleware.Principal{ID: "alice", Tenant: "acme"}
	args := json.RawMessage(`{"order_id":"o-1","amount":25}`)
	refund := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "refunded"}, nil
	}))

	_, err := refund.Invoke(ctx, middleware.NewCall("order_refund", args, alice))
	ae, _ := axerr.As(err)
	fmt.Println(ae.Code, ae.HTTPStatus(), ae.Details["confirmation_message"])

	// The person said yes.
	token, _, _ := e.IssueConfirmation(ctx, alice, "order_refund", args)
	call := middleware.NewCall("order_refund", args, alice)
	call.Credentials.Confirmation = token
	res, err := refund.Invoke(ctx, call)
	fmt.Println(res.Value, err)

	again := middleware.NewCall("order_refund", args, alice)
	again.Credentials.Confirmation = token
	_, err = refund.Invoke(ctx, again)
	ae, _ = axerr.As(err)
	fmt.Println(ae.Code, ae.Details["reason"])
	// Output:
	// AXAG_CONFIRMATION_MISSING 428 Refund 25 for order o-1?
	// refunded <nil>
	// AXAG_CONFIRMATION_MISSING already_used
}
