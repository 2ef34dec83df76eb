package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// postWith posts body on a session as raw HTTP with headers added, and
// returns the status and the body (the first event's data of a stream).
func postWith(t *testing.T, url, session, version, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", version)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				return resp.StatusCode, d
			}
		}
	}
	return resp.StatusCode, string(raw)
}

// TestStandardHeadersMatchTheBody: a client that mirrors its method and
// tool into MCP 2026-07-28's Mcp-Method and Mcp-Name headers, as a WAF or
// a load balancer in front of the gateway reads them, while its body calls
// another tool, is refused with HTTP 400 and JSON-RPC -32020 (HeaderMismatch),
// on the direct path and the SDK's, and the upstream never sees the call.
// Headers that match the body pass.
func TestStandardHeadersMatchTheBody(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	for _, path := range []string{"direct", "sdk"} {
		meta := ""
		if path == "sdk" {
			meta = `,"_meta":{"progressToken":"p"}`
		}
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}` + meta + `}}`
		for _, h := range []map[string]string{
			{"Mcp-Method": "tools/call", "Mcp-Name": "ask_note"},
			{"Mcp-Method": "tools/call", "Mcp-Name": b64("ask_note")},
			{"Mcp-Method": "tools/list"},
			{"Mcp-Name": "ask_note"},
			{"Mcp-Method": "tools/call", "Mcp-Name": "=?base64?not base64?="},
		} {
			before := len(up.seenTool("read_note"))
			code, got := postWith(t, url, cs.ID(), version, body, h)
			var m struct {
				ID    int `json:"id"`
				Error struct {
					Code int64 `json:"code"`
					Data struct {
						Code    string         `json:"code"`
						Details map[string]any `json:"details"`
					} `json:"data"`
				} `json:"error"`
			}
			json.Unmarshal([]byte(got), &m)
			if code != http.StatusBadRequest || m.Error.Code != mcp.CodeHeaderMismatch || m.ID != 7 {
				t.Errorf("%s %v: HTTP %d %s, want 400 with JSON-RPC %d", path, h, code, got, mcp.CodeHeaderMismatch)
			}
			if m.Error.Data.Details["reason"] != "header_mismatch" {
				t.Errorf("%s %v: no AXAG error with reason header_mismatch in %s", path, h, got)
			}
			if after := len(up.seenTool("read_note")); after != before {
				t.Fatalf("%s %v: the upstream ran read_note", path, h)
			}
		}
		for _, h := range []map[string]string{
			{"Mcp-Method": "tools/call", "Mcp-Name": "read_note"},
			{"Mcp-Method": "tools/call", "Mcp-Name": b64("read_note")},
			nil,
		} {
			before := len(up.seenTool("read_note"))
			if code, got := postWith(t, url, cs.ID(), version, body, h); code != http.StatusOK || !strings.Contains(got, `"result"`) {
				t.Errorf("%s %v: HTTP %d %s, want the call's result", path, h, code, got)
			}
			if after := len(up.seenTool("read_note")); after != before+1 {
				t.Errorf("%s %v: the upstream saw %d calls, want 1", path, h, after-before)
			}
		}
	}
}

// TestListsPrivateToCaches: the tools a caller is listed are its own: the
// result says so to caches (cacheScope "private", as MCP 2026-07-28's
// caching hints provide), and is stale at once (ttlMs 0).
func TestListsPrivateToCaches(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	code, got := postWith(t, url, cs.ID(), cs.InitializeResult().ProtocolVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	var m struct {
		Result struct {
			CacheScope *string `json:"cacheScope"`
			TTLMs      *int    `json:"ttlMs"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(got), &m); err != nil || code != http.StatusOK {
		t.Fatalf("tools/list: HTTP %d %s", code, got)
	}
	if m.Result.CacheScope == nil || *m.Result.CacheScope != "private" || m.Result.TTLMs == nil || *m.Result.TTLMs != 0 {
		t.Errorf("tools/list is not private to caches: %s", got)
	}
}
