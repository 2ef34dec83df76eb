// The HTTP quick start of README.md, compiled by go test, and kept equal
// to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"errors"
	"log"
	"net/http"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func main() {
	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()
	agents, people, err := handlers(enf)
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.ListenAndServe("127.0.0.1:8081", people)) }() // for people only, never agents
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", agents))
}

func handlers(enf *axgate.Enforcer) (agents, people http.Handler, err error) {
	orderTool := middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args() // already decoded, validated and allowed
		return middleware.Result{Value: map[string]any{"order_id": "o-1", "cart": args["cart_id"]}}, nil
	})
	// Who calls: stand-ins for this demo, a header naming the caller. In a real
	// service, agents bring bearer JWTs (httpgate.JWTBearer) and people the
	// session of your UI: never the same credentials.
	fromHeader := func(name string) func(*http.Request) (middleware.Principal, error) {
		return func(r *http.Request) (middleware.Principal, error) {
			if r.Header.Get(name) == "" {
				return middleware.Principal{}, errors.New("no " + name + " header")
			}
			return middleware.Principal{ID: r.Header.Get(name), Tenant: "acme"}, nil
		}
	}
	// Agents: GET /tools, GET /tools/{name}, POST /tools/{name}/validate, POST /tools/{name}/call.
	agents, err = httpgate.NewToolServer(enf, map[string]middleware.Invoker{"order_place": orderTool},
		httpgate.WithPrincipal(fromHeader("X-User")))
	// People: POST /confirmations, GET /approvals, POST /approvals/{id}.
	return agents, httpgate.NewHumanHandler(enf, fromHeader("X-Person")), err
}
