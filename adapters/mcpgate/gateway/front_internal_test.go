package gateway

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/middleware"
)

// resultValueOf is resultValue of a result of one text block.
func resultValueOf(text string) any {
	return resultValue(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}})
}

// TestMayBeJSONKeepsEveryJSONText: resultValue reads a text as JSON
// exactly when json.Valid does; mayBeJSON only spares it the texts that
// cannot be (any text json.Valid takes, mayBeJSON takes).
func TestMayBeJSONKeepsEveryJSONText(t *testing.T) {
	t.Parallel()
	texts := []string{`{}`, `[1]`, `"s"`, `-1`, `0`, `9.5e3`, `true`, `false`, `null`, " \t\r\n{\"a\":1} ",
		"", " ", "axgate enforces", "\u00a0{}", "\v1", "+1", ".5", "NaN", "{", "x{}"}
	for b := range 256 {
		texts = append(texts, string([]byte{byte(b)}), " "+string([]byte{byte(b)})+"1")
	}
	for _, s := range texts {
		if json.Valid([]byte(s)) && !mayBeJSON(s) {
			t.Errorf("%q is JSON, but mayBeJSON says it is not", s)
		}
		if rv, isRaw := resultValueOf(s).(json.RawMessage); isRaw != json.Valid([]byte(s)) || (isRaw && string(rv) != s) {
			t.Errorf("%q: resultValue %#v", s, resultValueOf(s))
		}
	}
}

// TestSessionKey: a caller's key is the JSON of its tenant and id, as
// json.Marshal writes it, whatever their characters.
func TestSessionKey(t *testing.T) {
	t.Parallel()
	for _, p := range []middleware.Principal{
		{}, {ID: "alice"}, {Tenant: "acme", ID: "bob"}, {Tenant: `a"b\c`, ID: "<é>&\u2028\x00\xff"}, {Tenant: "[\"x\",\"y\"]", ID: ","},
	} {
		want, _ := json.Marshal([2]string{p.Tenant, p.ID})
		if got := sessionKey(p); got != string(want) {
			t.Errorf("%q/%q: got %s, want %s", p.Tenant, p.ID, got, want)
		}
	}
}
