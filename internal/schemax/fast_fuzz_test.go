package schemax_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/schemax"
	"github.com/axgate/axgate/manifest"
)

// fastSchema is one action's compiled parameter schema with its fast path.
type fastSchema struct {
	name string
	doc  map[string]any
	v5   *jsonschema.Schema
	fast *schemax.Fast
}

// fastSchemas compiles the parameter schemas of the project's own test
// manifests and, when it is there, of the reference corpus's examples
// (../shared/spec/axag/valid-*.json), each with and without
// additionalProperties: false.
func fastSchemas(tb testing.TB) []fastSchema {
	tb.Helper()
	files := []string{
		fixtures.Manifest("shop-basic.json"),
		fixtures.Manifest("shop-full.json"),
		filepath.Join("..", "..", "testdata", "policy", "hotel.json"),
	}
	corpus, _ := filepath.Glob(filepath.Join(fixtures.CorpusDir(), "valid-*.json"))
	files = append(files, corpus...)
	var out []fastSchema
	for _, f := range files {
		m, err := manifest.LoadFile(f)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		for _, a := range m.Actions {
			for _, unknown := range []bool{false, true} {
				doc, s, err := manifest.CompileParams(a, unknown)
				if err != nil {
					tb.Fatal(err)
				}
				if s == nil {
					continue
				}
				fs := schemax.CompileFast(s)
				if fs == nil {
					tb.Fatalf("%s %s: the fast path does not cover a manifest's parameter schema", f, a.Intent)
				}
				out = append(out, fastSchema{name: filepath.Base(f) + ":" + a.Intent, doc: doc, v5: s, fast: fs})
			}
		}
	}
	return out
}

// FuzzFastPathAgreesWithV5 generates arguments for every action of the
// shared example manifests, from the fuzzer's bytes (steered by each schema:
// its enum items, bounds, lengths, formats and members, each sometimes broken)
// or, when the first byte is odd, decoded from the bytes as JSON. The fast
// path may only accept what v5 accepts; and on values whose numbers are all
// whole and below 2^53 (where it is exact) it accepts all of it.
func FuzzFastPathAgreesWithV5(f *testing.F) {
	schemas := fastSchemas(f)
	for _, seed := range []string{
		"", "\x00\x01\x02\x03", "\x02\x07\x07\x07\x07\x07\x07\x07\x07\x07\x07",
		"\x00\xff\x10\x20\x30\x40\x50\x60\x70\x80\x90",
		"\x01{\"city\":\"Lyon\",\"stars\":3,\"limit\":20}",
		"\x01{\"cart_id\":\"550e8400-e29b-41d4-a716-446655440000\",\"shipping_address_id\":\"a\"}",
		"\x01{\"hotel_id\":\"h\",\"check_in\":\"2026-05-01\",\"check_out\":\"2026-05-04\",\"guests\":2.5}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range schemas {
			var v any
			if len(data) > 0 && data[0]&1 == 1 {
				d, err := jsonx.Decode(data[1:], jsonx.Limits{MaxDepth: 64})
				if err != nil {
					return
				}
				v = d
			} else {
				g := &gen{data: data}
				v = g.value(s.v5, 0)
			}
			ok5 := s.v5.Validate(v) == nil
			fast := s.fast.Accepts(v)
			if fast && !ok5 {
				t.Fatalf("%s: the fast path accepts what v5 refuses: %#v\nv5: %v", s.name, v, s.v5.Validate(v))
			}
			if ok5 && !fast && exactNumbers(v) {
				t.Fatalf("%s: v5 accepts what the fast path refuses: %#v", s.name, v)
			}
		}
	})
}

// TestFastPathCoversExampleManifests: every example manifest's
// parameter schemas compile to a fast path (none silently falls back to v5
// on every call).
func TestFastPathCoversExampleManifests(t *testing.T) {
	if n := len(fastSchemas(t)); n < 10 {
		t.Fatalf("only %d schemas", n)
	}
}

// exactNumbers reports whether every number in v is whole and below 2^53,
// where the fast path decides exactly as v5 does.
func exactNumbers(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == math.Trunc(x) && math.Abs(x) < 1<<53
	case []any:
		for _, it := range x {
			if !exactNumbers(it) {
				return false
			}
		}
	case map[string]any:
		for _, it := range x {
			if !exactNumbers(it) {
				return false
			}
		}
	}
	return true
}

// gen builds a decoded JSON value for a schema from fuzzer bytes, mostly
// close to valid so that both acceptance and refusal are exercised.
type gen struct {
	data []byte
	i    int
}

func (g *gen) byte() byte {
	if g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return b
}

func (g *gen) value(s *jsonschema.Schema, depth int) any {
	c := g.byte()
	if c%11 == 10 || depth > 6 {
		return g.anyValue(depth)
	}
	if len(s.Enum) > 0 && c%3 != 0 {
		return s.Enum[int(g.byte())%len(s.Enum)]
	}
	t := ""
	if len(s.Types) > 0 {
		t = s.Types[int(g.byte())%len(s.Types)]
	} else {
		t = []string{"null", "boolean", "number", "integer", "string", "array", "object"}[g.byte()%7]
	}
	switch t {
	case "null":
		return nil
	case "boolean":
		return g.byte()&1 == 1
	case "number", "integer":
		return g.number(s, t == "integer")
	case "string":
		return g.str(s)
	case "array":
		max := 4
		if s.MaxItems >= 0 {
			max = s.MaxItems + 1
		}
		n := int(g.byte()) % (max + 1)
		arr := make([]any, n)
		item, _ := s.Items.(*jsonschema.Schema)
		for i := range arr {
			if item != nil {
				arr[i] = g.value(item, depth+1)
			} else {
				arr[i] = g.anyValue(depth + 1)
			}
		}
		return arr
	default:
		obj := map[string]any{}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			req := false
			for _, r := range s.Required {
				req = req || r == n
			}
			b := g.byte()
			if (req && b%8 != 0) || (!req && b%2 == 1) {
				obj[n] = g.value(s.Properties[n], depth+1)
			}
		}
		switch g.byte() % 8 {
		case 0:
			obj[g.str(&jsonschema.Schema{MinLength: -1, MaxLength: -1})] = g.anyValue(depth + 1)
		case 1:
			if len(names) > 0 {
				obj[strings.ToUpper(names[0])] = "x"
			}
		}
		return obj
	}
}

var fuzzStrings = []string{
	"", "a", "é", "2026-05-01", "2026-02-30", "2026-13-01", "2026-05-01T10:00:00Z", "2026-05-01T25:00:00Z",
	"a@b.co", "not an email", "https://example.com/x?y=1", "::", "550e8400-e29b-41d4-a716-446655440000",
	"550e8400-e29b-41d4-a716-44665544000", "DELETE", "delete", "admin", "h-1842", "\u00e9\u00e9\u00e9",
}

func (g *gen) str(s *jsonschema.Schema) string {
	switch c := g.byte(); c % 6 {
	case 0, 1:
		return fuzzStrings[int(g.byte())%len(fuzzStrings)]
	case 2:
		if s.MaxLength >= 0 {
			return strings.Repeat("é", max(0, s.MaxLength+int(g.byte()%3)-1)) // maxLength-1 .. maxLength+1 runes
		}
		return strings.Repeat("x", int(g.byte()))
	case 3:
		if s.MinLength > 0 {
			return strings.Repeat("b", s.MinLength-1+int(g.byte()%2))
		}
		return ""
	default:
		n := int(g.byte()) % 24
		b := make([]byte, 0, n)
		for range n {
			b = append(b, g.byte())
		}
		return strings.ToValidUTF8(string(b), "?")
	}
}

func (g *gen) number(s *jsonschema.Schema, integer bool) float64 {
	ratF := func(r interface{ Float64() (float64, bool) }) float64 { f, _ := r.Float64(); return f }
	var cands []float64
	if s.Minimum != nil {
		m := ratF(s.Minimum)
		cands = append(cands, m, m-1, math.Nextafter(m, math.Inf(-1)), math.Nextafter(m, math.Inf(1)))
	}
	if s.Maximum != nil {
		m := ratF(s.Maximum)
		cands = append(cands, m, m+1, math.Nextafter(m, math.Inf(1)), math.Nextafter(m, math.Inf(-1)))
	}
	cands = append(cands, 0, 1, -1, 2, 0.5, 1<<53, 1<<53+2, -(1 << 60), 1e21, 3.0000000000000004, 0.1)
	switch c := g.byte(); {
	case c%4 == 0:
		var b [8]byte
		for i := range b {
			b[i] = g.byte()
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	case c%4 == 1 && integer:
		return float64(int8(g.byte()))
	default:
		return cands[int(g.byte())%len(cands)]
	}
}

func (g *gen) anyValue(depth int) any {
	switch g.byte() % 7 {
	case 0:
		return nil
	case 1:
		return true
	case 2:
		return float64(int8(g.byte())) / 2
	case 3:
		return fuzzStrings[int(g.byte())%len(fuzzStrings)]
	case 4:
		if depth > 6 {
			return nil
		}
		return []any{g.anyValue(depth + 1)}
	case 5:
		if depth > 6 {
			return nil
		}
		return map[string]any{"k": g.anyValue(depth + 1)}
	default:
		return "x"
	}
}
