// The program of adapters/mcpgate/README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
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

	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1.0.0"}, nil)
	// Every manifest tool needs a handler, and every handler a manifest tool.
	if err := mcpgate.AddTools(server, enf, mcpgate.Handlers{
		"product_search": middleware.InvokerFunc(searchProducts),
		"order_place":    middleware.InvokerFunc(placeOrder),
	}); err != nil {
		log.Fatal(err)
	}

	// Streamable HTTP: the principal is the verified bearer token's.
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
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	http.Handle("/mcp", auth.RequireBearerToken(mcpgate.BearerVerifier(bearer), nil)(mcpHandler))
	log.Fatal(http.ListenAndServe("127.0.0.1:8081", nil))

	// On stdio instead, the server serves the local user who started it:
	//   mcpgate.AddTools(server, enf, handlers, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(me)))
	//   server.Run(ctx, &mcp.StdioTransport{})
}

// The handlers run only for calls axgate allowed.
func searchProducts(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args() // decoded once, validated
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"query": args["query"], "results": []string{"Desk lamp"}}}, nil
}

func placeOrder(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{"order_id": "ord-1", "status": "placed"}}, nil
}
