package schemax_test

import (
	"encoding/json"
	"testing"

	"github.com/axgate/axgate/internal/schemax"
)

// TestFastAccepts: the fast path accepts only what v5 accepts, and leaves to
// v5 (false) every refusal and the cases it does not decide exactly.
func TestFastAccepts(t *testing.T) {
	doc := `{
	  "type": "object", "additionalProperties": false, "required": ["id"],
	  "properties": {
	    "id": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
	    "day": {"type": "string", "format": "date"},
	    "n": {"type": "integer", "minimum": 1, "maximum": 5},
	    "rate": {"type": "number", "maximum": 0.1},
	    "kind": {"enum": ["a", "b", null]},
	    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
	    "big": {"type": "integer"}
	  }}`
	var d any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	s, err := schemax.Compile("mem://fast.json", d)
	if err != nil {
		t.Fatal(err)
	}
	f := schemax.CompileFast(s)
	if f == nil {
		t.Fatal("the schema uses only covered keywords, but CompileFast returned nil")
	}
	for _, tc := range []struct {
		args string
		fast bool // what the fast path answers
	}{
		{`{"id":"abc"}`, true},
		{`{"id":"abc","day":"2026-05-01","n":5,"rate":0.05,"kind":null,"tags":["x","y"]}`, true},
		{`{"id":"éé"}`, false},      // pattern
		{`{"id":"abcd"}`, false},    // maxLength (runes)
		{`{}`, false},               // required
		{`{"id":"a","x":1}`, false}, // additionalProperties
		{`{"id":"a","day":"2026-02-30"}`, false},
		{`{"id":"a","n":0}`, false},
		{`{"id":"a","n":2.5}`, false},
		{`{"id":"a","n":"2"}`, false},
		{`{"id":"a","kind":"c"}`, false},
		{`{"id":"a","tags":["x","y","z"]}`, false},
		{`{"id":"a","tags":[1]}`, false},
		{`{"id":"a","rate":0.1}`, false},             // equal to a bound no float64 holds: v5 decides (it accepts)
		{`{"id":"a","big":9007199254740992}`, false}, // 2^53: v5 decides (it accepts)
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.args), &v); err != nil {
			t.Fatal(err)
		}
		got := f.Accepts(v)
		if got != tc.fast {
			t.Errorf("Accepts(%s) = %v, want %v", tc.args, got, tc.fast)
		}
		if got && s.Validate(v) != nil {
			t.Errorf("Accepts(%s) but v5 refuses it: %v", tc.args, s.Validate(v))
		}
	}
	for _, uncovered := range []string{
		`{"type": "integer", "multipleOf": 2}`, `{"anyOf": [{"type": "string"}]}`, `{"enum": [1, 2]}`,
		`{"type": "object", "additionalProperties": {"type": "string"}}`, `{"type": "number", "exclusiveMaximum": 3}`,
	} {
		var d any
		if err := json.Unmarshal([]byte(uncovered), &d); err != nil {
			t.Fatal(err)
		}
		s, err := schemax.Compile("mem://u.json", d)
		if err != nil {
			t.Fatal(err)
		}
		if schemax.CompileFast(s) != nil {
			t.Errorf("%s: CompileFast covers a keyword it does not check", uncovered)
		}
	}
}
