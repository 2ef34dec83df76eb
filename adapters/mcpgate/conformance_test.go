package mcpgate_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adaptertest"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/middleware"
)

// TestConformance runs the adapters' shared suite against mcpgate over the
// SDK's in-memory transport; the session's principal is the server's.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, tools []string, tool adaptertest.Tool) adaptertest.Invoke {
		inv := middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
			args, err := call.Value()
			if err != nil {
				return middleware.Result{}, err
			}
			v, err := tool(ctx, call.Tool, args)
			return middleware.Result{Value: v}, err
		})
		server := mcp.NewServer(&mcp.Implementation{Name: "adaptertest", Version: "v0.0.1"}, nil)
		h := mcpgate.Handlers{}
		for _, name := range tools {
			if _, ok := e.Tool(name); ok {
				h[name] = inv
				continue
			}
			// A tool the host serves that the manifest does not declare.
			server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
				mcpgate.ToolHandler(e, inv, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(p))))
		}
		if err := mcpgate.AddTools(server, e, h, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(p))); err != nil {
			t.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return func(t *testing.T, name, args string) adaptertest.Outcome {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
			if err != nil {
				t.Fatalf("tools/call %s: %v", name, err)
			}
			return mcpOutcome(t, res)
		}
	}})
}

// mcpOutcome reads a tools/call result: a refusal's envelope or the tool's
// structured value.
func mcpOutcome(t *testing.T, res *mcp.CallToolResult) adaptertest.Outcome {
	t.Helper()
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
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("an error result without an AXAG envelope: %s (%v)", raw, err)
	}
	return adaptertest.Outcome{Code: env.Error.Code, Details: env.Error.Details}
}
