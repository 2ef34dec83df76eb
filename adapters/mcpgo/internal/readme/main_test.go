// The program of adapters/mcpgo/README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"log"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgo"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
)

func main() {
	m, err := manifest.LoadFile("axag.json") // declares product_search and order_place
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	s := server.NewMCPServer("shop", "v1.0.0", server.WithToolHandlerMiddleware(mcpgo.Middleware(enf)))
	// Registers each manifest tool with its input schema, annotations and
	// _meta["axag/safety"]; every manifest tool needs a handler.
	if err := mcpgo.AddTools(s, enf, map[string]server.ToolHandlerFunc{
		"product_search": searchProducts,
		"order_place":    placeOrder,
	}); err != nil {
		log.Fatal(err)
	}

	// The caller comes from the HTTP request's bearer token, never from the arguments.
	keys, err := token.LoadJWKSFile("principals.jwks.json")
	if err != nil {
		log.Fatal(err)
	}
	bearer, err := httpgate.JWTBearer(httpgate.BearerConfig{
		Keyfunc: token.Keyfunc(keys), Issuer: "https://id.example.com", Audience: "shop-mcp",
	})
	if err != nil {
		log.Fatal(err)
	}
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(mcpgo.HTTPContextFunc(bearer)))
	log.Fatal(http.ListenAndServe("127.0.0.1:8081", h))

	// On stdio, the server serves the local user who started it:
	//   server.WithToolHandlerMiddleware(mcpgo.Middleware(enf, mcpgo.WithPrincipal(mcpgo.StaticPrincipal(me))))
}

// The handlers run only for calls axgate allowed.
func searchProducts(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultStructured(map[string]any{"query": req.GetArguments()["query"], "results": []string{"Desk lamp"}}, "1 result"), nil
}

func placeOrder(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultStructured(map[string]any{"order_id": "ord-1", "status": "placed"}, "placed"), nil
}
