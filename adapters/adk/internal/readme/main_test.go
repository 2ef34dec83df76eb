// The program of adapters/adk/README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"log"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adk"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func newRunner(llm model.LLM, users map[string]middleware.Principal) (*runner.Runner, error) {
	m, err := manifest.LoadFile("axag.json") // declares order_place (confirmation_required)
	if err != nil {
		return nil, err
	}
	enf, err := axgate.New(m)
	if err != nil {
		return nil, err
	}
	placeOrder, err := functiontool.New(functiontool.Config{Name: "order_place", Description: "Place an order"},
		func(ctx agent.Context, args map[string]any) (map[string]any, error) {
			return map[string]any{"order_id": "ord-1", "status": "placed"}, nil // runs only when allowed
		})
	if err != nil {
		return nil, err
	}
	shopper, err := llmagent.New(llmagent.Config{Name: "shopper", Model: llm, Tools: []tool.Tool{placeOrder}})
	if err != nil {
		return nil, err
	}
	gate := adk.New(enf,
		// The person the agent acts for, as the host authenticated them.
		adk.WithPrincipal(func(ctx agent.Context) (middleware.Principal, error) { return users[ctx.UserID()], nil }),
		// ADK's own tools are not in the manifest.
		adk.WithUnmanagedTools("transfer_to_agent"),
	)
	p, err := gate.Plugin()
	if err != nil {
		return nil, err
	}
	return runner.New(runner.Config{
		AppName: "shop", Agent: shopper, SessionService: session.InMemoryService(),
		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}},
	})
}

func main() {
	var llm model.LLM // your model, e.g. gemini.NewModel(…)
	r, err := newRunner(llm, map[string]middleware.Principal{"alice": {ID: "alice", Tenant: "acme"}})
	if err != nil {
		log.Fatal(err)
	}
	_ = r // r.Run(ctx, "alice", sessionID, message, agent.RunConfig{})
}
