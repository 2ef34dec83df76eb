package jsonx

import (
	"strconv"
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

func TestDecodeIJSON(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 16, MaxDepth: 8, MaxMembers: 4, MaxItems: 4, IJSON: true}
	cases := []struct {
		name string
		in   string
		kind Kind
		path string
		ok   bool
	}{
		{name: "short integers and decimals", in: `{"a":123456789012345,"b":-0.1,"c":129.95,"d":2.5e-1,"e":0,"f":-0,"g":1e2,"h":0.30000000000000004}`, ok: false, kind: TooManyMembers, path: ""},
		{name: "exact numbers", in: `{"a":[123456789012345,-0.1,129.95,2.5e-1],"b":[0,-0,1e2,0.30000000000000004],"c":[9007199254740991,-9007199254740991,9.007199254740991e15,1E300]}`, kind: NumberNotInteroperable, path: "/c/3"},
		{name: "safe integers", in: `[[9007199254740991,-9007199254740991,9.007199254740991e15,1e15],[0.0e999999999999,5e-324,1.5,-2.25e-300]]`, ok: true},
		{name: "largest double is an integer", in: `[1.7976931348623157e308]`, kind: NumberNotInteroperable, path: "/0"},
		{name: "2^53", in: `{"id":9007199254740992}`, kind: NumberNotInteroperable, path: "/id"},
		{name: "2^53+1", in: `{"id":9007199254740993}`, kind: NumberNotInteroperable, path: "/id"},
		{name: "negative", in: `{"x":{"id":-9007199254740993}}`, kind: NumberNotInteroperable, path: "/x/id"},
		{name: "exponent", in: `{"id":1e20}`, kind: NumberNotInteroperable, path: "/id"},
		{name: "exponent on long digits", in: `{"id":12345678901234567890e0}`, kind: NumberNotInteroperable, path: "/id"},
		{name: "fraction that is a big integer", in: `{"id":1234567890123456.8e3}`, kind: NumberNotInteroperable, path: "/id"},
		{name: "user id", in: `{"user_id":1234567890123456800}`, kind: NumberNotInteroperable, path: "/user_id"},
		{name: "rounding decimal", in: `{"a":[1,{"p":0.10000000000000001}]}`, kind: NumberNotInteroperable, path: "/a/1/p"},
		{name: "too many digits", in: `{"pi":3.141592653589793238462643383279}`, kind: NumberNotInteroperable, path: "/pi"},
		{name: "overflow", in: `{"a":1e400}`, kind: NumberNotInteroperable, path: "/a"},
		{name: "huge exponent", in: `{"a":1.5e99999999999999999999}`, kind: NumberNotInteroperable, path: "/a"},
		{name: "underflow", in: `{"a":1e-400}`, kind: NumberNotInteroperable, path: "/a"},
		{name: "number at the root", in: `18446744073709551616`, kind: NumberNotInteroperable, path: ""},
		{name: "escaped key in path", in: `{"a/b":{"c~d":1e30}}`, kind: NumberNotInteroperable, path: "/a~1b/c~0d"},
		{name: "digits in strings", in: `{"a":"12345678901234567890","b12345678901234567890":1}`, ok: true},
		{name: "not json number", in: `{"a":01}`, kind: Syntax},
		{name: "not json and a big number", in: `{"a":99999999999999999999,}`, kind: Syntax},
		{name: "case fold", in: `{"tenant_id":"acme","TENANT_ID":"globex"}`, kind: AmbiguousKeys, path: "/TENANT_ID"},
		{name: "case fold nested", in: `{"a":[{"x":1},{"Name":1,"nAME":2}]}`, kind: AmbiguousKeys, path: "/a/1/nAME"},
		{name: "kelvin sign", in: `{"k":1,"\u212a":2}`, kind: AmbiguousKeys, path: "/\u212a"},
		{name: "kelvin sign raw", in: "{\"\u212a\":1,\"K\":2}", kind: AmbiguousKeys, path: "/K"},
		{name: "long s", in: "{\"s\":1,\"\u017f\":2}", kind: AmbiguousKeys, path: "/\u017f"},
		{name: "escaped capital", in: `{"ab":1,"\u0041B":2}`, kind: AmbiguousKeys, path: "/AB"},
		{name: "sigma", in: "{\"\u03c3\":1,\"\u03c2\":2}", kind: AmbiguousKeys, path: "/\u03c2"},
		{name: "different keys with capitals", in: `{"A":1,"b":2,"B2":3}`, ok: true},
		{name: "capitals in different objects", in: `{"a":{"ID":1},"b":{"id":2}}`, ok: true},
		{name: "full folding is not simple folding", in: "{\"ss\":1,\"\u00df\":2}", ok: true},
		{name: "exact duplicate still reported as such", in: `{"a":1,"A":2,"a":3}`, kind: DuplicateKey, path: "/a"},
		{name: "many members", in: `{"a":{"m1":1,"m2":2,"m3":3,"m4":4,"m5":5}}`, kind: TooManyMembers, path: "/a"},
		{name: "many members in an array", in: `[1,[{"k":"v"},{"m1":1,"m2":2,"m3":3,"m4":4,"m5":5}]]`, kind: TooManyMembers, path: "/1/1"},
		{name: "many items", in: `{"a":{"ids":[1,2,3,4,5]}}`, kind: TooManyItems, path: "/a/ids"},
		{name: "many items nested", in: `[[1,2],[1,2,3,4],[[],"a,b",{"x":[1,2,3,4,5]}]]`, kind: TooManyItems, path: "/2/2/x"},
		{name: "many items at the root", in: `["a","b","c","d","e"]`, kind: TooManyItems, path: ""},
		{name: "items limit per array", in: `{"a":[1,2,3,4],"b":[[1,2,3,4],[1,2,3,4]],"c":"[1,2,3,4,5]","d":[]}`, ok: true},
		{name: "lone high surrogate", in: `{"text":"\ud800"}`, kind: LoneSurrogate, path: "/text"},
		{name: "lone low surrogate", in: `{"a":["ok","x\uDC00y"]}`, kind: LoneSurrogate, path: "/a/1"},
		{name: "high surrogate then a letter", in: `{"t":"\ud83dA"}`, kind: LoneSurrogate, path: "/t"},
		{name: "high surrogate then a non-surrogate escape", in: `{"t":"\ud83d\u0041"}`, kind: LoneSurrogate, path: "/t"},
		{name: "two high surrogates", in: `{"t":"\ud83d\ud83d"}`, kind: LoneSurrogate, path: "/t"},
		{name: "reversed pair", in: `{"t":"\ude00\ud83d"}`, kind: LoneSurrogate, path: "/t"},
		{name: "lone surrogate in a key", in: `{"a":1,"b\udfff":2}`, kind: LoneSurrogate, path: "/b\ufffd"},
		{name: "surrogate pairs and escapes", in: `{"t":"\ud83d\ude00 \uD83D\uDE00 \u00e9 \\ud800 \"\ud800\udc00","\ud83d\ude00":1}`, ok: true},
		{name: "members limit per object", in: `{"a":{"m1":1,"m2":2,"m3":3,"m4":4},"b":{"m1":1,"m2":2,"m3":3,"m4":4},"c":[{"x":"a:b"}]}`, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Decode([]byte(tc.in), lim)
			if tc.ok {
				if err != nil {
					t.Fatalf("Decode = %v; want a value", err)
				}
				return
			}
			e, isErr := err.(*Error)
			if !isErr {
				t.Fatalf("Decode = %v, %v (%T); want *Error", v, err, err)
			}
			if e.Kind != tc.kind || (tc.kind != Syntax && e.Path != tc.path) {
				t.Fatalf("got kind %d path %q (%s); want kind %d path %q", e.Kind, e.Path, e.Msg, tc.kind, tc.path)
			}
		})
	}
}

// TestDecodeIJSONOff: without IJSON, MaxMembers and MaxItems (the manifest
// loader's settings) the new checks do not run.
func TestDecodeIJSONOff(t *testing.T) {
	in := `{"id":9007199254740993,"ID":1,"x":{"a":1,"b":2,"c":3,"d":4,"e":5},"s":"\ud800","l":[1,2,3,4,5]}`
	if _, err := Decode([]byte(in), Limits{}); err != nil {
		t.Fatalf("Decode = %v", err)
	}
}

// TestDecodeMembersBeforeDecoding: a wide object is refused by the scan,
// before encoding/json builds anything: the refusal allocates next to nothing
// whatever the width.
func TestDecodeMembersBeforeDecoding(t *testing.T) {
	wide := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"wide":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":1`)
		}
		b.WriteString(`}}`)
		return []byte(b.String())
	}
	lim := Limits{MaxMembers: 1000, IJSON: true}
	allocs := func(doc []byte) float64 {
		return testing.AllocsPerRun(5, func() {
			_, err := Decode(doc, lim)
			if e, ok := err.(*Error); !ok || e.Kind != TooManyMembers || e.Path != "/wide" {
				t.Fatalf("Decode = %v", err)
			}
		})
	}
	// The count does not grow with the width: decoding the members would
	// allocate for each of them (tens of thousands here). The race
	// detector's runtime adds a few allocations of its own, which vary from
	// run to run, hence the slack.
	narrow, broad := allocs(wide(1001)), allocs(wide(50000))
	if broad > narrow+10 || narrow > 30 {
		t.Errorf("refusing an object of 1,001 members allocates %v times, of 50,000 members %v times; want a small count that does not grow", narrow, broad)
	}
}

// TestDecodeItemsBeforeDecoding: a long array is refused by the scan, before
// encoding/json builds a value per item (a megabyte of "a", items became
// 250 MB of decoded values): the refusal allocates next to nothing whatever
// the length.
func TestDecodeItemsBeforeDecoding(t *testing.T) {
	long := func(n int) []byte {
		return []byte(`{"ids":[` + strings.TrimSuffix(strings.Repeat(`"a",`, n), ",") + `]}`)
	}
	lim := Limits{MaxItems: 10000, IJSON: true}
	allocs := func(doc []byte) float64 {
		return testing.AllocsPerRun(5, func() {
			_, err := Decode(doc, lim)
			if e, ok := err.(*Error); !ok || e.Kind != TooManyItems || e.Path != "/ids" {
				t.Fatalf("Decode = %v", err)
			}
		})
	}
	short, huge := allocs(long(10001)), allocs(long(262000))
	if huge > short+10 || short > 30 {
		t.Errorf("refusing an array of 10,001 items allocates %v times, of 262,000 items %v times; want a small count that does not grow", short, huge)
	}
	if _, err := Decode(long(10000), lim); err != nil {
		t.Errorf("an array of exactly MaxItems items: %v", err)
	}
}

// TestInteroperableFastPathAllocates nothing: the numbers of everyday
// arguments are checked without allocating.
func TestInteroperableFastPathAllocates(t *testing.T) {
	for _, lit := range []string{"42", "-7", "129.95", "0.1", "2.5e-1", "1e15", "123456789012345", "9007199254740991", "1e20", "0.30000000000000004"} {
		b := []byte(lit)
		if n := testing.AllocsPerRun(100, func() { Interoperable(b) }); n != 0 {
			t.Errorf("Interoperable(%s) allocates %v times", lit, n)
		}
	}
	doc := []byte(`{"order_id":1234567,"amount":129.95,"lines":[{"sku":"A-1","qty":2,"price":19.99},{"sku":"\u00e9\ud83d\ude00","qty":1}]}`)
	if n := testing.AllocsPerRun(100, func() { _, _, _, _ = scan(doc, Limits{MaxDepth: 64, MaxMembers: 1000, MaxItems: 10000, IJSON: true}) }); n != 0 {
		t.Errorf("scan allocates %v times", n)
	}
}

func TestFoldKey(t *testing.T) {
	same := [][2]string{{"tenant_id", "TENANT_ID"}, {"k", "\u212a"}, {"K", "\u212a"}, {"s", "\u017f"}, {"S", "\u017f"}, {"\u03a3", "\u03c2"}, {"\u00c9t\u00e9", "\u00e9T\u00c9"}}
	for _, p := range same {
		if FoldKey(p[0]) != FoldKey(p[1]) || !strings.EqualFold(p[0], p[1]) {
			t.Errorf("%q and %q fold apart", p[0], p[1])
		}
	}
	differ := [][2]string{{"ss", "\u00df"}, {"a", "b"}, {"i", "\u0131"}, {"id", "i d"}}
	for _, p := range differ {
		if FoldKey(p[0]) == FoldKey(p[1]) {
			t.Errorf("%q and %q fold together", p[0], p[1])
		}
	}
}

// TestFoldCollidesInAgrees: the pairwise check of small objects and the set
// of folded keys of large ones decide alike.
func TestFoldCollidesInAgrees(t *testing.T) {
	pairs := [][2]string{{"tenant_id", "TENANT_ID"}, {"k", "\u212a"}, {"s", "\u017f"}, {"\u03c3", "\u03c2"}, {"ss", "\u00df"}, {"a", "b"}, {"i", "\u0131"}}
	for _, p := range pairs {
		want := strings.EqualFold(p[0], p[1])
		small := map[string]any{p[0]: 1, p[1]: 2}
		large := map[string]any{p[0]: 1, p[1]: 2}
		for i := range 20 {
			large["filler"+strconv.Itoa(i)] = i
		}
		if got := foldCollidesIn(small); got != want {
			t.Errorf("small %q: %v, want %v", p, got, want)
		}
		if got := foldCollidesIn(large); got != want {
			t.Errorf("large %q: %v, want %v", p, got, want)
		}
	}
}
