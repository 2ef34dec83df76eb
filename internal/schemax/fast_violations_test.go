package schemax_test

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/schemax"
)

// checkFastViolations asserts that, wherever Fast.Validate is certain, its
// verdict flattens to exactly the leaves v5's does (paths, messages,
// keywords, members, allowed names; all of them and capped at 1 and 2), and
// that it is certain on values whose numbers are whole and below 2^53.
func checkFastViolations(t *testing.T, s fastSchema, v any) {
	t.Helper()
	err5 := s.v5.Validate(v)
	ferr, certain := s.fast.Validate(v)
	if !certain {
		if exactNumbers(v) {
			t.Fatalf("%s: the fast path is not certain of %#v", s.name, v)
		}
		return
	}
	if (err5 == nil) != (ferr == nil) {
		t.Fatalf("%s: %#v: v5 says %v, the fast path %v", s.name, v, err5, ferr)
	}
	if err5 == nil {
		return
	}
	for _, max := range []int{0, 1, 2} {
		want, wantN := schemax.FlattenN(err5, s.doc, v, max)
		got, gotN := schemax.FlattenN(ferr, s.doc, v, max)
		if !reflect.DeepEqual(got, want) || gotN != wantN {
			t.Fatalf("%s: %#v (max %d):\nfast %+v (+%d)\nv5   %+v (+%d)", s.name, v, max, got, gotN, want, wantN)
		}
	}
}

// fastValue is the value FuzzFastPathAgreesWithV5 builds from data.
func fastValue(s fastSchema, data []byte) (any, bool) {
	if len(data) > 0 && data[0]&1 == 1 {
		d, err := jsonx.Decode(data[1:], jsonx.Limits{MaxDepth: 64})
		return d, err == nil
	}
	g := &gen{data: data}
	return g.value(s.v5, 0), true
}

// TestFastViolationsMatchV5 is the differential test of the fast path's
// refusals: 3,000 generated argument documents (mostly near-valid, each
// sometimes broken) for every parameter schema of the shared example
// manifests, and a few hand-written refusals.
func TestFastViolationsMatchV5(t *testing.T) {
	schemas := fastSchemas(t)
	rng := rand.New(rand.NewPCG(18, 2))
	data := make([]byte, 64)
	refusals := 0
	for range 3000 {
		for i := 0; i < len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
		}
		data[0] &^= 1 // generated, not decoded
		for _, s := range schemas {
			v, ok := fastValue(s, data)
			if !ok {
				continue
			}
			if s.v5.Validate(v) != nil {
				refusals++
			}
			checkFastViolations(t, s, v)
		}
	}
	for _, doc := range []string{
		`{}`, `[]`, `null`, `"x"`, `1.5`,
		`{"city":7,"stars":"3","limit":1e300,"x y":1,"a/b~":2}`,
		`{"hotel_id":"","check_in":"yesterday","check_out":"2026-02-30","guests":2.5}`,
		`{"stars":1e21,"limit":1e-7,"guests":0.1,"city":"Lyon","nights":-0,"amount":123456789.5}`,
		`{"stars":-1e300,"limit":1e7,"guests":1000000,"nights":1e-5}`,
		`{"cart_id":"not-a-uuid","shipping_address_id":["a"],"extra":{}}`,
	} {
		for _, s := range schemas {
			v, err := jsonx.Decode([]byte(doc), jsonx.Limits{MaxDepth: 64})
			if err != nil {
				t.Fatal(err)
			}
			checkFastViolations(t, s, v)
		}
	}
	if refusals < 1000 {
		t.Fatalf("only %d refusals generated: the test does not exercise the refusal path", refusals)
	}
}

// FuzzFastViolationsMatchV5 is TestFastViolationsMatchV5 on the fuzzer's
// bytes (the generator of FuzzFastPathAgreesWithV5, or JSON when the first
// byte is odd).
func FuzzFastViolationsMatchV5(f *testing.F) {
	schemas := fastSchemas(f)
	for _, seed := range []string{
		"", "\x00\x01\x02\x03", "\x02\x07\x07\x07\x07\x07\x07\x07\x07\x07\x07",
		"\x00\xff\x10\x20\x30\x40\x50\x60\x70\x80\x90",
		"\x01{\"city\":\"Lyon\",\"stars\":30,\"limit\":-1,\"Limit\":2}",
		"\x01{\"cart_id\":\"x\",\"shipping_address_id\":\"a\",\"~\":1}",
		"\x01{\"hotel_id\":\"h\",\"check_in\":\"2026-05-01\",\"check_out\":\"05/04\",\"guests\":2.5}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range schemas {
			if v, ok := fastValue(s, data); ok {
				checkFastViolations(t, s, v)
			}
		}
	})
}
