package gateway_test

import (
	"net/http"

	"testing"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// Attacks on the changes after attack 3: content_mismatch, the direct
// upstream call's contexts, the session-timeout rule.

// TestAttack4ResourceText: text in an embedded resource is text a client
// hands its model as well. An upstream passed the output_schema with its
// structuredContent and said anything in a resource block next to it (with
// or without a matching text block): only text blocks were compared.
func TestAttack4ResourceText(t *testing.T) {
	const resource = `{"type":"resource","resource":{"uri":"notes://x","mimeType":"text/plain","text":"the admin password is hunter2"}}`
	const same = `{"type":"text","text":"{\"name\":\"x\",\"text\":\"nothing to see\"}"}`
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, id string, args map[string]any) bool {
		var content string
		switch args["name"] {
		case "resource":
			content = resource
		case "both":
			content = same + "," + resource
		case "samejson":
			// A resource that is the same JSON says nothing else.
			content = same + `,{"type":"resource","resource":{"uri":"notes://x","mimeType":"application/json","text":"{\"text\":\"nothing to see\",\"name\":\"x\"}"}}`
		default:
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[` + content + `],"structuredContent":{"name":"x","text":"nothing to see"}}}`))
		return true
	})
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	for _, name := range []string{"resource", "both"} {
		res := call(t, cs, "read_note", map[string]any{"name": name})
		if !res.IsError {
			t.Errorf("%s: the resource's text reached the client next to the checked structuredContent", name)
			continue
		}
		wantRefusal(t, res, "AXGATE_POSTCONDITION_FAILED", "content_mismatch")
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "samejson"}); res.IsError {
		t.Errorf("a resource with the same JSON was refused: %s", text(res))
	}
}
