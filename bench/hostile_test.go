package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// hostileManifest has one read action whose arguments can take every kind
// of worst-case body: a free-form object (meta: deep or wide), a string with
// no maximum length (text), and an array of integers (ids: one violation
// per wrong item). Unknown top-level keys are refused (the default).
const hostileManifest = `{
  "version": "1.0.0",
  "entities": [{"name": "doc", "actions": [
    {"intent": "doc.put", "action_type": "read", "operation_id": "doc_put",
     "description": "Store a document", "risk_level": "none", "idempotent": true, "scope": "global",
     "parameters": {
       "name": {"type": "string", "required": true, "description": "Document name"},
       "meta": {"type": "object", "description": "Free-form metadata"},
       "text": {"type": "string", "description": "Body text"},
       "ids": {"type": "array", "description": "Item ids", "items": {"type": "integer", "description": "Item id"}}}}
  ]}]
}`

// hostileMaxBytes is the default argument size limit (1 MiB): the long
// string fills a body up to it.
const hostileMaxBytes = 1 << 20

// members returns n members "k00000":1,… (11 bytes each), comma-separated.
func members(n int) string {
	var b strings.Builder
	b.Grow(11 * n)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%05d":1`, i)
	}
	return b.String()
}

// hostileBodies are the worst case of each kind, each within the size and
// depth limits so that it reaches the schema: the default depth limit is 64
// (the argument object is level 1, meta level 2).
func hostileBodies() []struct {
	name string
	body []byte
} {
	deep := `{"name":"d","meta":` + strings.Repeat(`{"a":`, 62) + `1` + strings.Repeat(`}`, 62) + `}`
	long := `{"name":"d","text":"`
	long += strings.Repeat("x", hostileMaxBytes-len(long)-2) + `"}`
	return []struct {
		name string
		body []byte
	}{
		{"deep", []byte(deep)},
		{"wide=1000", []byte(`{"name":"d","meta":{` + members(1000) + `}}`)},
		{"wide=90000", []byte(`{"name":"d","meta":{` + members(90000) + `}}`)},
		{"long_string", []byte(long)},
		{"unknown_keys=90000", []byte(`{"name":"d",` + members(90000) + `}`)},
		{"violations=90000", []byte(`{"name":"d","ids":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 90000), ",") + `]}`)},
	}
}

// BenchmarkHostile prices the worst-case body of each kind through the
// standard chain (path=call: the refusal, if any, rendered as its AXAG
// envelope) and through the Validation API (path=validate: the answer
// rendered). Besides time, B/op and allocs/op it reports alloc-B/in-B, the
// bytes allocated per byte of input, and answer-B, the size of what the
// caller gets back.
func BenchmarkHostile(b *testing.B) {
	m, err := manifest.Parse([]byte(hostileManifest))
	if err != nil {
		b.Fatal(err)
	}
	enf, err := axgate.New(m, telemetryOff())
	if err != nil {
		b.Fatal(err)
	}
	defer enf.Close()
	chain := enf.Wrap(okTool)
	ctx := context.Background()
	caller := middleware.Principal{ID: "u-1", Tenant: "acme"}

	for _, tc := range hostileBodies() {
		if len(tc.body) > hostileMaxBytes {
			b.Fatalf("%s: %d bytes, over the limit", tc.name, len(tc.body))
		}
		b.Run("body="+tc.name+"/path=call", func(b *testing.B) {
			run(b, len(tc.body), func() int {
				_, err := chain.Invoke(ctx, middleware.NewCall("doc_put", tc.body, caller))
				if err == nil {
					return 0
				}
				out, merr := json.Marshal(axerr.From(err))
				if merr != nil {
					b.Fatal(merr)
				}
				return len(out)
			})
		})
		b.Run("body="+tc.name+"/path=validate", func(b *testing.B) {
			run(b, len(tc.body), func() int {
				out, err := json.Marshal(enf.Validate("doc_put", tc.body))
				if err != nil {
					b.Fatal(err)
				}
				return len(out)
			})
		})
	}
}

// run times op, which returns the size of its answer, and reports the bytes
// allocated per input byte and the answer's size.
func run(b *testing.B, inputBytes int, op func() int) {
	var before, after runtime.MemStats
	answer := 0
	b.ReportAllocs()
	runtime.ReadMemStats(&before)
	for b.Loop() {
		answer = op()
	}
	runtime.ReadMemStats(&after)
	if b.N > 0 {
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(inputBytes), "alloc-B/in-B")
		b.ReportMetric(float64(answer), "answer-B")
	}
}
