package eino_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adaptertest"
	"github.com/axgate/axgate/adapters/eino"
	"github.com/axgate/axgate/middleware"
)

// suiteTool is an invokable Eino tool that runs the suite's tool.
type suiteTool struct {
	name string
	run  adaptertest.Tool
}

func (s *suiteTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: s.name, Desc: s.name}, nil
}

func (s *suiteTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return "", err
	}
	out, err := s.run(ctx, s.name, v)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(out)
	return string(raw), err
}

// TestConformance runs the adapters' shared suite against the Eino tool
// middleware in a tools node; the principal is the run's context's.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, tools []string, run adaptertest.Tool) adaptertest.Invoke {
		var base []tool.BaseTool
		for _, name := range tools {
			base = append(base, &suiteTool{name: name, run: run})
		}
		node, err := compose.NewToolNode(context.Background(), &compose.ToolsNodeConfig{
			Tools:               base,
			ToolCallMiddlewares: []compose.ToolMiddleware{eino.Middleware(e)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, name, args string) adaptertest.Outcome {
			t.Helper()
			msg := schema.AssistantMessage("", []schema.ToolCall{{ID: "call-1", Function: schema.FunctionCall{Name: name, Arguments: args}}})
			out, err := node.Invoke(eino.ContextWithPrincipal(context.Background(), p), msg)
			if err != nil {
				t.Fatalf("tools node: %v", err)
			}
			if len(out) != 1 {
				t.Fatalf("want one tool message, got %d", len(out))
			}
			var env envelope
			if json.Unmarshal([]byte(out[0].Content), &env) == nil && env.Error.Code != "" {
				return adaptertest.Outcome{Code: env.Error.Code, Details: env.Error.Details}
			}
			var v any
			if err := json.Unmarshal([]byte(out[0].Content), &v); err != nil {
				t.Fatalf("the tool message %q is neither a refusal nor JSON", out[0].Content)
			}
			return adaptertest.Outcome{Result: v}
		}
	}})
}
