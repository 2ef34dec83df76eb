package jsonx

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// fastLimits are the limit sets the differential checks run with: none, the
// call arguments' (I-JSON), and small ones that the inputs reach.
var fastLimits = []Limits{
	{},
	{MaxBytes: 1 << 20, MaxDepth: 64, MaxMembers: 1000, MaxItems: 10000, IJSON: true},
	{MaxDepth: 2, MaxMembers: 2, MaxItems: 2, IJSON: true},
}

var fastSeeds = []string{
	`{"a":1}`, `{"a":1,"a":2}`, `{"A":1,"a":2}`, `{"K":1,"\u212a":2}`, `{"k":1,"K":2}`, `[1,2,3]`, `[]`, `{}`,
	` {"a" : [ true , false , null ] } `, `{"s":"tab\there \"q\" \\ \/"}`, `{"s":"\ud800"}`, `{"s":"\u00e9"}`,
	`-0`, `-0.0`, `0.1`, `0.10000000000000001`, `9007199254740993`, `123456789012345`, `1234567890123456`,
	`1e400`, `01`, `-`, `1.`, `1e`, `{"a":1,}`, `[1,]`, `"\x01"`, "\"\xff\"", `{"é":"ü"}`, `{"x":{"y":{"z":1}}}`,
	`[[[]]]`, `nul`, `truex`, `{"a":1}x`, `"a\qb"`,
}

// FuzzDecodeFastAgrees: whatever the one-pass decoder accepts, the checked
// path (scan + encoding/json) accepts too, with the same value; on the
// common inputs it does accept (so that it is measured, not bypassed).
func FuzzDecodeFastAgrees(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range fastLimits {
			fast, ok := decodeFast(data, lim)
			slow, err := decodeChecked(data, lim)
			if !ok {
				continue
			}
			if err != nil {
				t.Fatalf("%+v: the fast decoder accepts %q, the checked path refuses it: %v", lim, data, err)
			}
			if !reflect.DeepEqual(fast, slow) || !sameZeros(fast, slow) {
				t.Fatalf("%+v: %q decodes to %#v, the checked path to %#v", lim, data, fast, slow)
			}
		}
	})
}

// sameZeros compares the signs of zeros, which reflect.DeepEqual does not.
func sameZeros(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Signbit(x) == math.Signbit(y)
	case []any:
		y := b.([]any)
		for i := range x {
			if !sameZeros(x[i], y[i]) {
				return false
			}
		}
	case map[string]any:
		y := b.(map[string]any)
		for k := range x {
			if !sameZeros(x[k], y[k]) {
				return false
			}
		}
	}
	return true
}

// TestDecodeFastTakesCommonInputs: the benchmark inputs (plain keys, simple
// escapes, integers, decimals) take the one-pass path.
func TestDecodeFastTakesCommonInputs(t *testing.T) {
	lim := fastLimits[1]
	for _, in := range benchInputs {
		if _, ok := decodeFast(in.doc, lim); !ok {
			t.Errorf("%s: not decoded by the fast path", in.name)
		}
	}
	for _, s := range []string{`{"s":"a\"b\\c\nd"}`, `[1,-2,0.5,1e3,true,false,null,{}]`} {
		v, ok := decodeFast([]byte(s), lim)
		var want any
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("%s: fast path gives %#v, %v; want %#v", s, v, ok, want)
		}
	}
}

// BenchmarkDecodeEncodingJSON is encoding/json into an any on the same
// inputs: the cost per KB Decode must not exceed.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.doc)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(in.doc, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
