package mcpgo_test

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgo"
	"github.com/axgate/axgate/middleware"
)

func wideObject(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteByte('}')
	return b.String()
}

// TestIJSONArguments: arguments that are not I-JSON are refused with their
// code, reason and path, and the mcp-go handler never runs; an accepted
// call's handler reads the value the gates checked (its request's raw
// arguments and the map mcp-go decoded).
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
	e := newEnforcer(t, axgate.WithUnknownParams(), keep)
	runs := 0
	var got mcp.CallToolRequest
	h := map[string]server.ToolHandlerFunc{}
	for _, tl := range e.Tools() {
		h[tl.Name] = func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			runs++
			got = req
			mu.Unlock()
			return mcp.NewToolResultStructured(map[string]any{"ok": true}, "ok"), nil
		}
	}
	s := server.NewMCPServer("shop", "v0.0.1", server.WithToolHandlerMiddleware(mcpgo.Middleware(e, asAlice())))
	if err := mcpgo.AddTools(s, e, h); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, s)
	cases := []struct {
		name, args, code, reason, path string
	}{
		{"case-folded keys", `{"query":"lamp","QUERY":"rm -rf"}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/QUERY"},
		{"long s", `{"query":"lamp","filter":{"size":"a","\u017fize":"b"}}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/filter/\u017fize"},
		{"integer above 2^53", `{"query":"lamp","page":9007199254740993}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/page"},
		{"wide object", `{"query":"lamp","x":` + wideObject(1001) + `}`, "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := refusal(t, call(t, c, "product_search", tc.args, nil))
			vs, _ := env.Error.Details["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at = vs[0].(map[string]any)["path"]
			}
			if env.Error.Code != tc.code || env.Error.Details["reason"] != tc.reason || at != tc.path {
				t.Fatalf("refusal %+v; want %s reason %s at %s", env.Error, tc.code, tc.reason, tc.path)
			}
			mu.Lock()
			defer mu.Unlock()
			if runs != 0 {
				t.Fatalf("the handler ran %d times", runs)
			}
		})
	}
	in := `{"query":"lamp","page":9007199254740991,"Note":0.1}`
	if res := call(t, c, "product_search", in, nil); res.IsError {
		t.Fatalf("refused: %+v", res.Content)
	}
	mu.Lock()
	defer mu.Unlock()
	var bound any
	if err := got.BindArguments(&bound); err != nil || !reflect.DeepEqual(bound, checked) || !reflect.DeepEqual(got.GetArguments(), checked) {
		t.Fatalf("the handler reads %v / %v (%v), the gates checked %v", bound, got.GetArguments(), err, checked)
	}
}
