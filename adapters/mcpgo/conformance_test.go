package mcpgo_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adaptertest"
	"github.com/axgate/axgate/adapters/mcpgo"
	"github.com/axgate/axgate/middleware"
)

// TestConformance runs the adapters' shared suite against mcpgo over
// mcp-go's in-process transport; the session's principal is the server's.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, tools []string, tool adaptertest.Tool) adaptertest.Invoke {
		handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			v, err := tool(ctx, req.Params.Name, req.GetArguments())
			if err != nil {
				return nil, err
			}
			return mcpgo.Success(v), nil
		}
		s := server.NewMCPServer("adaptertest", "v0.0.1", server.WithToolHandlerMiddleware(mcpgo.Middleware(e, mcpgo.WithPrincipal(mcpgo.StaticPrincipal(p)))))
		h := map[string]server.ToolHandlerFunc{}
		for _, name := range tools {
			if _, ok := e.Tool(name); ok {
				h[name] = handler
				continue
			}
			// A tool the host serves that the manifest does not declare.
			s.AddTool(mcp.NewTool(name), handler)
		}
		if err := mcpgo.AddTools(s, e, h); err != nil {
			t.Fatal(err)
		}
		c := inProcess(t, s)
		return func(t *testing.T, name, args string) adaptertest.Outcome {
			t.Helper()
			res := call(t, c, name, args, nil)
			raw, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError {
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				return adaptertest.Outcome{Result: v}
			}
			env := refusal(t, res)
			return adaptertest.Outcome{Code: env.Error.Code, Details: env.Error.Details}
		}
	}})
}
