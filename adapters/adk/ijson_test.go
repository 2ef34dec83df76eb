package adk_test

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/genai"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/middleware"
)

// TestIJSONArguments: function-call arguments that decoders read
// differently — keys equal under case folding, integers a double does not
// hold, objects wider than the member limit — are refused with their code,
// reason and path, and the ADK tool never runs; an accepted call's tool gets
// the value the gates checked.
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
	wide := map[string]any{}
	for i := range 1001 {
		wide["k"+strconv.Itoa(i)] = 0
	}
	cases := []struct {
		name               string
		args               map[string]any
		code, reason, path string
	}{
		{"case-folded keys", map[string]any{"query": "lamp", "QUERY": "rm -rf"}, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/query"},
		{"integer above 2^53", map[string]any{"query": "lamp", "page": int64(9007199254740993)}, "AXAG_INVALID_TYPE", "number_not_interoperable", "/page"},
		{"wide object", map[string]any{"query": "lamp", "x": wide}, "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
	}
	var script []*genai.Part
	for _, tc := range cases {
		script = append(script, callPart("product_search", tc.args))
	}
	good := map[string]any{"query": "lamp", "page": 9007199254740991.0, "Note": 0.1}
	script = append(script, callPart("product_search", good))
	f := newFixture(t, newEnforcer(t, axgate.WithUnknownParams(), keep), script)
	rs := responses(f.turn(t, userText("find a lamp")), "product_search")
	if len(rs) != len(cases)+1 {
		t.Fatalf("want %d responses, got %v", len(cases)+1, rs)
	}
	for i, tc := range cases {
		vs, _ := details(rs[i])["violations"].([]any)
		var at any
		if len(vs) == 1 {
			at = vs[0].(map[string]any)["path"]
		}
		// json.Marshal sorts map keys: "QUERY" comes before "query", so
		// "query" is the second spelling.
		if code(rs[i]) != tc.code || details(rs[i])["reason"] != tc.reason || at != tc.path {
			t.Errorf("%s: %v; want %s reason %s at %s", tc.name, rs[i], tc.code, tc.reason, tc.path)
		}
	}
	if n := f.shop.count("product_search"); n != 1 {
		t.Fatalf("the tool ran %d times, want once (the accepted call)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(rs[len(cases)]["args"], checked) || !reflect.DeepEqual(checked, good) {
		t.Fatalf("the tool got %v, the gates checked %v", rs[len(cases)]["args"], checked)
	}
}
