package eino_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/eino"
	"github.com/axgate/axgate/middleware"
)

// argsTool is an invokable tool that keeps the arguments it ran with.
type argsTool struct {
	mu   sync.Mutex
	runs int
	args string
}

func (s *argsTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "product_search", Desc: "search"}, nil
}

func (s *argsTool) InvokableRun(_ context.Context, args string, _ ...tool.Option) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.args = args
	return `{"ok":true}`, nil
}

// TestIJSONArguments: tool-call arguments that decoders read differently are
// refused with their code, reason and path and the Eino tool never runs; an
// accepted call's tool runs with the arguments the gates checked.
func TestIJSONArguments(t *testing.T) {
	var mu sync.Mutex
	var checked any
	keep := axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "test_checked", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			v, err := call.Value()
			if err != nil {
				return middleware.Result{}, err
			}
			mu.Lock()
			checked = v
			mu.Unlock()
			return next.Invoke(ctx, call)
		}})
	})
	tl := &argsTool{}
	node, err := compose.NewToolNode(context.Background(), &compose.ToolsNodeConfig{
		Tools:               []tool.BaseTool{tl},
		ToolCallMiddlewares: []compose.ToolMiddleware{eino.Middleware(newEnforcer(t, axgate.WithUnknownParams(), keep))},
	})
	if err != nil {
		t.Fatal(err)
	}
	call := func(args string) string {
		msg := schema.AssistantMessage("", []schema.ToolCall{{ID: "call-1", Function: schema.FunctionCall{Name: "product_search", Arguments: args}}})
		out, err := node.Invoke(asAlice(), msg)
		if err != nil || len(out) != 1 {
			t.Fatalf("tools node: %v, %d messages", err, len(out))
		}
		return out[0].Content
	}
	var wide strings.Builder
	wide.WriteString(`{"query":"lamp","x":{`)
	for i := range 1001 {
		if i > 0 {
			wide.WriteByte(',')
		}
		wide.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	wide.WriteString(`}}`)
	cases := []struct {
		name, args, code, reason, path string
	}{
		{"case-folded keys", `{"query":"lamp","QUERY":"rm -rf"}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/QUERY"},
		{"kelvin sign", `{"query":"lamp","filter":{"\u212a":1,"k":2}}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/filter/k"},
		{"integer above 2^53", `{"query":"lamp","page":12345678901234567890e0}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/page"},
		{"wide object", wide.String(), "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := refusal(t, call(tc.args))
			vs, _ := env.Error.Details["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at = vs[0].(map[string]any)["path"]
			}
			if env.Error.Code != tc.code || env.Error.Details["reason"] != tc.reason || at != tc.path {
				t.Fatalf("refusal %+v; want %s reason %s at %s", env.Error, tc.code, tc.reason, tc.path)
			}
			tl.mu.Lock()
			defer tl.mu.Unlock()
			if tl.runs != 0 {
				t.Fatalf("the tool ran %d times", tl.runs)
			}
		})
	}
	if out := call(`{"query":"lamp","page":9007199254740991,"Note":0.1}`); out != `{"ok":true}` {
		t.Fatalf("accepted call answered %s", out)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	var got any
	if err := json.Unmarshal([]byte(tl.args), &got); err != nil || !reflect.DeepEqual(got, checked) {
		t.Fatalf("the tool ran with %s, the gates checked %v", tl.args, checked)
	}
}
