package jsonx

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 10, MaxDepth: 4}
	cases := []struct {
		name string
		in   string
		kind Kind
		path string
		ok   bool
	}{
		{name: "object", in: `{"a":1,"b":{"c":[1,2,{"d":"x:y"}]}}`, ok: true},
		{name: "escaped quote and colon in string", in: `{"a\":b":"c\\","d":":"}`, ok: true},
		{name: "duplicate top", in: `{"a":1,"a":2}`, kind: DuplicateKey, path: "/a"},
		{name: "duplicate nested", in: `{"a":{"x":1},"b":[{"y":1,"y":2}]}`, kind: DuplicateKey, path: "/b/0/y"},
		{name: "duplicate after nested", in: `{"a":{"x":{"p":1}},"b":2,"b":3}`, kind: DuplicateKey, path: "/b"},
		{name: "too deep", in: `{"a":[[[[1]]]]}`, kind: TooDeep},
		{name: "bad utf8", in: "{\"a\":\"\xff\"}", kind: BadUTF8},
		{name: "syntax", in: `{"a":}`, kind: Syntax},
		{name: "trailing", in: `{} {}`, kind: Syntax},
		{name: "too large", in: `{"a":"` + strings.Repeat("x", 2000) + `"}`, kind: TooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Decode([]byte(tc.in), lim)
			if tc.ok {
				if err != nil || v == nil {
					t.Fatalf("Decode = %v, %v; want a value", v, err)
				}
				return
			}
			e, isErr := err.(*Error)
			if !isErr {
				t.Fatalf("Decode error = %v (%T); want *Error", err, err)
			}
			if e.Kind != tc.kind || e.Path != tc.path {
				t.Fatalf("got kind %d path %q (%s); want kind %d path %q", e.Kind, e.Path, e.Msg, tc.kind, tc.path)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	v, _ := Decode([]byte(`{"a/b":{"c~d":[10,20]}}`), Limits{})
	got, ok := Resolve(v, "/a~1b/c~0d/1")
	if !ok || got != float64(20) {
		t.Fatalf("Resolve = %v, %v", got, ok)
	}
	if _, ok := Resolve(v, "/nope"); ok {
		t.Fatal("Resolve found a missing member")
	}
}
