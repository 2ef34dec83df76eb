package mcpgate_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/middleware"
)

// A forwarded result reaches the client as the other server sent it, while
// the chain (postconditions, output_schema, idempotency records) sees its
// data.
func TestForwarded(t *testing.T) {
	upstream := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "42 notes"}},
		StructuredContent: map[string]any{"count": 42},
		Meta:              mcp.Meta{"upstream/key": "kept"},
	}
	fw := &mcpgate.Forwarded{Result: upstream, Value: map[string]any{"count": 42}}
	got, err := mcpgate.Success(middleware.Result{Value: fw})
	if err != nil || got != upstream {
		t.Fatalf("Success rendered %+v (%v), want the upstream's result as it is", got, err)
	}
	raw, err := json.Marshal(fw)
	if err != nil || string(raw) != `{"count":42}` {
		t.Fatalf("a forwarded result marshals as %s (%v), want its data", raw, err)
	}
	if got, _ := mcpgate.Success(middleware.Result{Value: &mcpgate.Forwarded{}}); got == nil || got.IsError || got.Content == nil {
		t.Fatalf("an empty forwarded result renders as %+v", got)
	}
}
