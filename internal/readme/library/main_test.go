// The library quick start of README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"encoding/json"
	"log"
	"os"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func main() {
	m, err := manifest.LoadFile("axag.json") // JSON or YAML, v1 or reference form
	if err != nil {
		log.Fatal(err) // every problem, each with its JSON Pointer path
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	// Your tool, and the same tool inside the chain of gates (wrap a tool once).
	orderTool := middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args() // already decoded, validated and allowed
		return middleware.Result{Value: map[string]any{"order_id": "o-1", "cart": args["cart_id"]}}, nil
	})
	placeOrder := enf.Wrap(orderTool)

	// An agent's call, for a caller your authentication established.
	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"nope"}`),
		middleware.Principal{ID: "user-1", Tenant: "acme"})
	_, err = placeOrder.Invoke(context.Background(), call)
	if e, ok := axerr.As(err); ok {
		// e.Code == "AXAG_INVALID_FORMAT" (the first violation's, in path order),
		// e.HTTPStatus() == 400, e.Violations lists /cart_id (AXAG_INVALID_FORMAT,
		// uuid) and /shipping_address_id (AXAG_MISSING_PARAM).
		json.NewEncoder(os.Stdout).Encode(e) // {"error":{"code","type","message","details"}}
	}
}
