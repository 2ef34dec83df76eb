package schemax_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/axgate/axgate/internal/schemax"
)

// FlattenN keeps exactly the first max leaves Flatten would list, in the
// same order, and counts the others: capping changes how much is built,
// never which violations are reported first.
func TestFlattenNKeepsFlattensFirstLeaves(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{
	  "type": "object",
	  "required": ["a", "m", "z"],
	  "additionalProperties": false,
	  "properties": {
	    "b": {"type": "array", "items": {"type": "integer"}},
	    "n": {"type": "object", "additionalProperties": false, "properties": {"x": {"type": "string"}}},
	    "s": {"type": "string", "maxLength": 2}
	  }}`), &doc); err != nil {
		t.Fatal(err)
	}
	s, err := schemax.Compile("mem://t.json", doc)
	if err != nil {
		t.Fatal(err)
	}
	inst := map[string]any{"s": "long", "b": []any{"x", 1.0, "y", true}, "n": map[string]any{"x": 1.0, "q~/": 1.0, "p": 1.0}}
	for i := range 30 {
		inst[fmt.Sprintf("u%02d", 29-i)] = 1.0
	}
	verr := s.Validate(inst)
	if verr == nil {
		t.Fatal("valid")
	}
	all := schemax.Flatten(verr, doc, inst)
	if len(all) != 3+3+3+1+30 {
		t.Fatalf("%d leaves: %v", len(all), all)
	}
	for max := 1; max <= len(all)+1; max++ {
		got, omitted := schemax.FlattenN(verr, doc, inst, max)
		want := all[:min(max, len(all))]
		if !reflect.DeepEqual(got, want) || omitted != len(all)-len(want) {
			t.Fatalf("max %d: got %v (+%d), want %v (+%d)", max, got, omitted, want, len(all)-len(want))
		}
	}
}

// The leaves past the cap are counted, not built: flattening 20,000 unknown
// members into 20 allocates about as much as flattening 200. Exactly as
// much without the race detector (68 and 68); with it, whose sync.Pool
// drops what it holds at random, 78 to 89 for either, once 75 and 86, which
// failed the bound of +10 this test had. Building every member would be
// 20,000 allocations and more.
func TestFlattenNDoesNotBuildWhatItDrops(t *testing.T) {
	doc := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	s, err := schemax.Compile("mem://u.json", doc)
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(n int) float64 {
		inst := make(map[string]any, n)
		for i := range n {
			inst[fmt.Sprintf("k%05d", i)] = 1.0
		}
		verr := s.Validate(inst)
		return testing.AllocsPerRun(3, func() {
			if got, omitted := schemax.FlattenN(verr, doc, inst, 20); len(got) != 20 || omitted != n-20 {
				t.Fatalf("%d leaves, %d omitted", len(got), omitted)
			}
		})
	}
	if small, large := allocs(200), allocs(20000); large > 2*small {
		t.Fatalf("FlattenN allocates %v times for 20,000 unknown members, %v for 200", large, small)
	}
}
