// The program of adapters/eino/README.md, compiled by go test, and kept
// equal to the README by TestREADMESnippetsAreTested in the root.

package main

import (
	"context"
	"encoding/json"
	"log"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/eino"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func main() {
	ctx := context.Background()
	m, err := manifest.LoadFile("axag.json") // declares product_search
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	// The model sees the schema the gate enforces.
	info, err := eino.ToolInfo(enf, "product_search")
	if err != nil {
		log.Fatal(err)
	}
	search := utils.NewTool(info, func(ctx context.Context, args map[string]any) (map[string]any, error) {
		return map[string]any{"results": []string{"Desk lamp"}}, nil // runs only when allowed
	})

	node, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{
		Tools:               []tool.BaseTool{search},
		ToolCallMiddlewares: []compose.ToolMiddleware{eino.Middleware(enf)},
	})
	if err != nil {
		log.Fatal(err)
	}

	// Run the graph for the authenticated person the agent acts for.
	ctx = eino.ContextWithPrincipal(ctx, middleware.Principal{ID: "alice", Tenant: "acme"})
	msgs, err := node.Invoke(ctx, schema.AssistantMessage("", []schema.ToolCall{{
		ID: "call-1", Function: schema.FunctionCall{Name: "product_search", Arguments: `{"query": 7}`},
	}}))
	if err != nil {
		log.Fatal(err)
	}
	var refusal map[string]any
	_ = json.Unmarshal([]byte(msgs[0].Content), &refusal)
	log.Println(refusal["error"]) // AXAG_INVALID_TYPE, with /query in details.violations
}
