package jsonx

import (
	"strings"
	"testing"
)

// TestSyntaxErrorsGiveLineAndColumn: a JSON syntax error says where, by
// line and column as the YAML errors do; before, only "(at byte 674)".
func TestSyntaxErrorsGiveLineAndColumn(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"trailing comma", "{\n  \"version\": \"1.0.0\",\n  \"actions\": [\n    {\"intent\": \"a.b\",}\n  ]\n}\n",
			"invalid character '}' looking for beginning of object key string (line 4, column 22)"},
		{"first line", `{"a" 1}`, "invalid character '1' after object key (line 1, column 6)"},
		{"characters, not bytes", "{\"é€\": [1,,2]}", "invalid character ',' looking for beginning of value (line 1, column 11)"},
		{"cut short", "{\n  \"version\":\n\n", "unexpected end of JSON input (line 2, column 13)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc), Limits{})
			if err == nil || !strings.HasSuffix(err.Error(), c.want) || strings.Contains(err.Error(), "at byte") {
				t.Errorf("error %v, want it to end with %q", err, c.want)
			}
		})
	}
}
