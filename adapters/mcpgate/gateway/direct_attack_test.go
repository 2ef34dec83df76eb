package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// Attacks on the direct path (direct.go, directup.go).

// rawUpstream is a notes upstream whose tools/call of read_note is answered
// by answer (with the request's JSON-RPC id) when it returns true; every
// other request reaches the notes server.
func rawUpstream(t *testing.T, answer func(w http.ResponseWriter, id string, args map[string]any) bool) (*notes, string) {
	t.Helper()
	n := newNotes()
	srv := n.server()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			sdk.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.Params.Name == "read_note" && answer(w, string(m.ID), m.Params.Arguments) {
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return n, hs.URL
}

// TestAttack3EventBoundCR: an upstream's event is bounded by
// WithMaxMessageBytes however its lines end. boundedBody took "\n\r\r\n"
// for the blank line that ends an event and reset its count, where the
// event reader takes the line "\r" for a field and reads on: one event of
// any size was buffered and relayed (here 1 MiB past a 64 KiB bound; an
// upstream could send gigabytes within the call timeout).
func TestAttack3EventBoundCR(t *testing.T) {
	const limit = 64 << 10
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, id string, args map[string]any) bool {
		if args["name"] != "crlf" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"name\":\"crlf\",\"text\":\"x\"}"}],"_meta":{"pad":[`+"\n")
		chunk := `data: "` + strings.Repeat("A", 16<<10) + `",` + "\n\r\r\n"
		for range 64 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return true
			}
		}
		io.WriteString(w, `data: "end"]}}}`+"\n\n")
		return true
	})
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxMessageBytes(limit))
	cs := connect(t, serve(t, g), "alice-token", nil)
	res := callWithin(t, cs, "read_note", map[string]any{"name": "crlf"})
	if !res.IsError {
		raw, _ := json.Marshal(res)
		t.Fatalf("a %d byte answer was relayed past the bound of %d", len(raw), limit)
	}
	wantRefusal(t, res, "AXGATE_TOOL_FAILED", "result_too_large")
}
