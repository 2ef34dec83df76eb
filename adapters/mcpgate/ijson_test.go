package mcpgate_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/axgate/axgate"
)

// ijsonCases are product_search arguments that decoders read differently:
// every adapter refuses them before the tool runs.
var ijsonCases = []struct {
	name, args, code, reason, path string
}{
	{"case-folded keys", `{"query":"lamp","QUERY":"rm -rf"}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/QUERY"},
	{"kelvin sign", `{"query":"lamp","filter":{"kind":"a","\u212aind":"b"}}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/filter/\u212aind"},
	{"integer above 2^53", `{"query":"lamp","page":9007199254740993}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/page"},
	{"rounding decimal", `{"query":"lamp","limit":5.0000000000000001}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/limit"},
	{"wide object", `{"query":"lamp","x":` + wideObject(1001) + `}`, "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
}

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

// TestIJSONArguments: arguments that are not I-JSON are refused over MCP
// with their code, reason and path, and the tool never runs; an accepted
// call's tool gets the value the gates checked.
func TestIJSONArguments(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice(), enfOpts: []axgate.Option{axgate.WithUnknownParams()}})
	for _, tc := range ijsonCases {
		t.Run(tc.name, func(t *testing.T) {
			env := refusal(t, f.call(t, "product_search", tc.args, nil))
			vs, _ := env.Error.Details["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at = vs[0].(map[string]any)["path"]
			}
			if env.Error.Code != tc.code || env.Error.Details["reason"] != tc.reason || at != tc.path {
				t.Fatalf("refusal %+v; want %s reason %s at %s", env.Error, tc.code, tc.reason, tc.path)
			}
			if n := f.seen.count(); n != 0 {
				t.Fatalf("the tool ran %d times", n)
			}
		})
	}
	in := `{"query":"lamp","page":9007199254740991,"Note":0.1}`
	structured(t, f.call(t, "product_search", in, nil))
	call := f.seen.last()
	got, err := call.Value()
	var want any
	_ = json.Unmarshal([]byte(in), &want)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the tool got %s = %v (%v), want %v", call.Arguments, got, err, want)
	}
}
