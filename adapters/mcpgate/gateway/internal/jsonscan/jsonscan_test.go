package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMembers: on any input, Members and Elements never panic; on a JSON
// object whose keys are unique and unescaped, Members finds exactly the
// members encoding/json decodes, with the same values.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":"}","b":[1,{"c":"]"}],"d":{"e":null}}`, `{"a":"\"}"}`, ` {"a" : true , "b":false}`,
		`{"a":1,"a":2}`, `{"\u0061":1}`, `[1,"2",{"3":[]}]`, `{"a":"x\\"}`, `{"a":-1.5e10,"b":"é"}`, `{"a":`, `{"a":"`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := map[string]string{}
		dup := false
		ok := Members(data, func(k, v []byte) bool {
			if _, seen := got[string(k)]; seen {
				dup = true
			}
			got[string(k)] = string(v)
			return true
		})
		Elements(data, func([]byte) bool { return true })
		if !json.Valid(data) {
			return
		}
		var want map[string]json.RawMessage
		isObject := json.Unmarshal(data, &want) == nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		if !ok {
			// Refused: not an object, or a key with an escape or not UTF-8.
			if isObject && !bytes.Contains(data, []byte(`\`)) && utf8.Valid(data) {
				t.Fatalf("members refused the object %s", data)
			}
			return
		}
		if !isObject {
			t.Fatalf("members took %s, which is not a JSON object", data)
		}
		if dup {
			return // encoding/json keeps the last; the direct path refuses both
		}
		if len(got) != len(want) {
			t.Fatalf("%s: members found %d members, encoding/json %d", data, len(got), len(want))
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != string(v) {
				t.Fatalf("%s: member %q is %q, encoding/json has %q", data, k, g, v)
			}
		}
	})
}

// TestUniqueMembers: a key written twice is found, among few keys or many
// (past the ones compared without a map), and an object of unique keys, or
// anything Members refuses, is told apart.
func TestUniqueMembers(t *testing.T) {
	many := func(dup string) string {
		var b bytes.Buffer
		b.WriteString(`{`)
		for i := range 20 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		fmt.Fprintf(&b, `%q:0}`, dup)
		return b.String()
	}
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{}`, true},
		{`{"a":1,"b":2}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":1,"b":{"a":2}}`, true},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"h":10}`, false},
		{many("k3"), false},
		{many("k19"), false},
		{many("other"), true},
		{`[1]`, false},
		{`{"a":1`, false},
	} {
		if got := UniqueMembers([]byte(c.data)); got != c.want {
			t.Errorf("UniqueMembers(%s) = %v, want %v", c.data, got, c.want)
		}
	}
}

// TestAppendString: a string is written as json.Marshal writes it,
// whatever its bytes (each of the 256, escapes, HTML characters, U+2028,
// bytes that are not UTF-8).
func TestAppendString(t *testing.T) {
	cases := []string{"", "read", "docs/intro.md", "a \"q\" <b>&", "é\u2028\u2029", "\xff\xfe", "tab\there"}
	for b := range 256 {
		cases = append(cases, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for _, s := range cases {
		got, err := AppendString([]byte("prefix:"), s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if !bytes.Equal(got, append([]byte("prefix:"), want...)) {
			t.Errorf("%q: got %s, want prefix:%s", s, got, want)
		}
	}
}

// TestStringAsEncodingJSON: String decodes a JSON string, escapes and all,
// exactly as encoding/json does, and refuses a string with an escape that
// it refuses.
func TestStringAsEncodingJSON(t *testing.T) {
	cases := []string{`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u20AC\u0000\u001f\uFFFF"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`,
		`"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, `"a\"`, `"a\`, "\"\xff\\n\"", "\"tab\there\"", `"{\"path\":\"docs/intro.md\",\"size\":142}"`,
		`"é\n"`, "\"\u2028\\n\"", `"\\"`, `"\"`, `"a"b"`, `"\u0022"`, `"\u005c"`}
	for b := range 128 {
		cases = append(cases, `"\`+string(rune(b))+`"`, `"x\u00`+fmt.Sprintf("%02x", b)+`y"`)
	}
	for _, raw := range cases {
		var want string
		wantOK := json.Unmarshal([]byte(raw), &want) == nil
		got, ok := String([]byte(raw))
		if !wantOK && !strings.Contains(raw[1:len(raw)-1], `\`) {
			continue // what String reads of a malformed string without escapes is its callers' (they pass values read whole)
		}
		if ok != wantOK || (ok && got != want) {
			t.Errorf("String(%s) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, wantOK)
		}
	}
}

// FuzzString: on any JSON string, String decodes what encoding/json does.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"a\"b"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\n"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		if json.Unmarshal(raw, &want) != nil || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return // a value read whole: no space around it
		}
		if got, ok := String(raw); !ok || got != want {
			t.Errorf("String(%q) = %q, %v; encoding/json: %q", raw, got, ok, want)
		}
	})
}

// FuzzAppendString: any string is written as json.Marshal writes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "<x>&\n\t\x01\x7f", `{"path":"docs/intro.md"}`, "é\u2028\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got, err := AppendString(nil, s); err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, %v; json.Marshal: %s", s, got, err, want)
		}
	})
}
