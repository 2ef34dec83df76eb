// The program of adapters/httpgate/README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

func main() {
	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m,
		axgate.WithTokens(axgate.TokenOptions{Issuer: "https://id.example", Audience: "shop-api"}),
		axgate.WithJWKSFile("tokens.jwks"), // keys of confirmation and approval tokens
	)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	// Who calls: a bearer JWT of your identity provider.
	idp, err := token.LoadJWKSFile("idp.jwks")
	if err != nil {
		log.Fatal(err)
	}
	auth, err := httpgate.JWTBearer(httpgate.BearerConfig{
		Keyfunc:  token.Keyfunc(idp), // kid → key, each key bound to one algorithm
		Issuer:   "https://id.example",
		Audience: "shop-api",
		// TenantClaim "tenant", RolesClaim "roles", ScopeClaim "scope" by default.
	})
	if err != nil {
		log.Fatal(err)
	}

	// 1. Gate the routes of an existing application.
	app := http.NewServeMux()
	app.HandleFunc("POST /orders", placeOrder)
	app.HandleFunc("DELETE /accounts/{account_id}", deleteAccount)
	app.HandleFunc("POST /agent", dispatchByIntent) // reads X-AXAG-Intent itself
	gate, err := httpgate.NewMiddleware(enf,
		httpgate.WithPrincipal(auth),
		httpgate.WithRoute("POST /orders", "order_place"),
		httpgate.WithRoute("DELETE /accounts/{account_id}", "account.delete"), // tool name or intent
		httpgate.WithIntentHeaderOn("POST /agent"),                            // this endpoint dispatches by X-AXAG-Intent
	)
	if err != nil {
		log.Fatal(err) // a bad pattern, an unknown tool, a path value no gate would check
	}
	api := gate(app)

	// 2. Or serve the manifest's tools: GET /tools, GET /tools/{name},
	//    POST /tools/{name}/validate, POST /tools/{name}/call.
	tools, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{
		"order_place": middleware.InvokerFunc(placeOrderTool),
	}, httpgate.WithPrincipal(auth))
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle("/tools", tools)
	mux.Handle("/tools/", tools)
	go serve(":8080", mux)

	// 3. The human endpoints mint tokens: mount them on the UI backend only,
	//    behind the person's session (not an agent's bearer token).
	ui := http.NewServeMux()
	ui.Handle("/axag/", http.StripPrefix("/axag", httpgate.NewHumanHandler(enf, sessionPrincipal)))
	serve("127.0.0.1:8081", ui)
}

func serve(addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Fatal(srv.ListenAndServe())
}

// The application's handlers run only for requests the gate allowed.
func placeOrder(w http.ResponseWriter, r *http.Request)       { w.WriteHeader(http.StatusCreated) }
func deleteAccount(w http.ResponseWriter, r *http.Request)    { w.WriteHeader(http.StatusNoContent) }
func dispatchByIntent(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }

// The bare tool behind POST /tools/order_place/call: the server wraps it.
func placeOrderTool(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{"order_id": "o-1", "status": "placed"}}, nil
}

// sessionPrincipal is the person of the UI's session (your session store).
func sessionPrincipal(r *http.Request) (middleware.Principal, error) {
	return middleware.Principal{ID: "alice", Tenant: "acme"}, nil
}
