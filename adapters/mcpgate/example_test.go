package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const exampleManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "operation_id": "product_search",
     "description": "Search the product catalogue", "risk_level": "none", "idempotent": true, "scope": "global",
     "required_parameters": [{"name": "query", "type": "string", "description": "Search text"}]},
    {"intent": "order.place", "entity": "order", "action_type": "write", "operation_id": "order_place",
     "description": "Place an order", "risk_level": "high", "confirmation_required": true, "idempotent": false, "scope": "user",
     "required_parameters": [{"name": "cart_id", "type": "string", "description": "Cart", "format": "uuid"}]}
  ]
}`

func searchProducts(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args() // decoded once, validated, allowed
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"query": args["query"], "count": 2}}, nil
}

func placeOrder(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{"order_id": "ord-1", "status": "placed"}}, nil
}

func ExampleAddTools() {
	m, err := manifest.Parse([]byte(exampleManifest))
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1.0.0"}, nil)
	err = mcpgate.AddTools(server, enf, mcpgate.Handlers{
		"product_search": middleware.InvokerFunc(searchProducts),
		"order_place":    middleware.InvokerFunc(placeOrder),
	}, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(middleware.Principal{ID: "alice", Tenant: "acme"})))
	if err != nil {
		log.Fatal(err)
	}

	// A client, here over the SDK's in-memory transport.
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	for _, args := range []string{`{"query": 7}`, `{"query": "lamp"}`} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "product_search", Arguments: json.RawMessage(args)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "order_place", Arguments: map[string]any{"cart_id": "3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f"}})
	if err != nil {
		log.Fatal(err)
	}
	env, _ := json.Marshal(res.StructuredContent)
	var refusal struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(env, &refusal)
	fmt.Println(res.IsError, refusal.Error.Code)
	// Output:
	// true Refused (AXAG_INVALID_TYPE): invalid argument /query: expected string, but got number
	// - /query: expected string, but got number
	// Suggestion: Fix /query as the message says; the tool's inputSchema has the rules.
	// Next step: Send the parameter with the declared type and call again.
	// false {"count":2,"query":"lamp"}
	// true AXAG_CONFIRMATION_MISSING
}
