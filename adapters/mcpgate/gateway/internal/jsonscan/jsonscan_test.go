package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
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
