package jsonscan

import (
	"bytes"
	"encoding/json"
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
