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

const exampleManifest = `{
  "version": "1.0.0",
  "actions": [{
    "intent": "product.search", "entity": "product", "action_type": "read",
    "description": "Search the catalogue",
    "required_parameters": [{"name": "query", "type": "string"}],
    "optional_parameters": [{"name": "limit", "type": "integer", "min": 1, "max": 100}],
    "risk_level": "none", "scope": "global"
  }]
}`

// Wrap a tool in the chain and read a refusal the way an agent would.
func Example() {
	m, err := manifest.Parse([]byte(exampleManifest))
	if err != nil {
		panic(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		panic(err)
	}
	search := enf.Wrap(middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args()
		return middleware.Result{Value: []string{"result for " + args["query"].(string)}}, nil
	}))

	ctx := context.Background()
	caller := middleware.Principal{ID: "user-1"}
	_, err = search.Invoke(ctx, middleware.NewCall("product_search", json.RawMessage(`{"limit": 500}`), caller))
	if e, ok := axerr.As(err); ok {
		fmt.Println(e.Code, e.HTTPStatus())
		for _, v := range e.Violations {
			fmt.Println(" ", v.Code, v.Path)
		}
	}
	res, err := search.Invoke(ctx, middleware.NewCall("product_search", json.RawMessage(`{"query": "lamp"}`), caller))
	fmt.Println(res.Value, err)
	// Output:
	// AXAG_OUT_OF_RANGE 400
	//   AXAG_OUT_OF_RANGE /limit
	//   AXAG_MISSING_PARAM /query
	// [result for lamp] <nil>
}

// Validate answers the Tool Validation API without running anything.
func ExampleEnforcer_Validate() {
	m, _ := manifest.Parse([]byte(exampleManifest))
	enf, _ := axgate.New(m)
	r := enf.Validate("product_search", []byte(`{"query": 7}`))
	out, _ := json.Marshal(r)
	fmt.Println(r.Status(), string(out))
	// Output: 200 {"valid":false,"errors":[{"path":"/query","message":"expected string, but got number","keyword":"type"}]}
}

// Each call passes only the gates that have something to check for its
// action: a plain read skips confirmation, approval, rate limit,
// idempotency and the condition gates, which a refund with a confirmation
// and a rate limit goes through.
func ExampleEnforcer_StagesFor() {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search",
	   "risk_level": "none", "scope": "global"},
	  {"intent": "order.refund", "entity": "order", "action_type": "write", "description": "Refund",
	   "required_parameters": [{"name": "order_id", "type": "string"}],
	   "confirmation_required": true, "rate_limit": "5/minute", "idempotent": false}]}`))
	if err != nil {
		panic(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		panic(err)
	}
	defer enf.Close()
	for _, tool := range []string{"product_search", "order_refund"} {
		stages, _ := enf.StagesFor(tool)
		fmt.Println(tool, stages)
	}
	// Output:
	// product_search [observe intent access params commit]
	// order_refund [observe intent access params rate_limit confirmation idempotency commit]
}
