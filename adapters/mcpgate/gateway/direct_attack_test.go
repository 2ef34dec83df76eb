package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// Attacks on the direct path (direct.go, directup.go).

// rawUpstream is a notes upstream whose tools/call of read_note is answered
// by answer (with the request's JSON-RPC id) when it returns true; every
// other request reaches the notes server.
func rawUpstream(t *testing.T, answer func(w http.ResponseWriter, id string, args map[string]any) bool) (*notes, string) {
	t.Helper()
	n, sdk := notesHandler()
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

// TestAttack3ProtocolMeta: a call whose _meta names a protocol version of
// its own (SEP-2575's io.modelcontextprotocol/protocolVersion) is refused by
// the SDK on a session of the front (HTTP 400, unsupported protocol
// version: the front is stateful); the direct path ran it and answered a
// result. Whatever the SDK makes of the protocol's own _meta keys is the
// SDK's to decide.
func TestAttack3ProtocolMeta(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	for _, meta := range []string{
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"` + version + `"}`,
	} {
		before := len(up.seenTool("read_note"))
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"},"_meta":` + meta + `}}`
		viaSDK := strings.Replace(body, `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)
		codeS, _, gotS := postCall(t, url, "alice-token", cs.ID(), version, viaSDK)
		if codeS == http.StatusOK {
			t.Fatalf("%s: the SDK took it (%v): the test shows nothing", meta, gotS)
		}
		code, ct, got := postCall(t, url, "alice-token", cs.ID(), version, body)
		if code != codeS {
			t.Errorf("%s: HTTP %d %s %v, where the SDK answers HTTP %d", meta, code, ct, got, codeS)
		}
		if n := len(up.seenTool("read_note")) - before; n != 0 {
			t.Errorf("%s: the upstream ran %d calls the SDK refuses", meta, n)
		}
	}
}

// TestAttack3PrimingEvent: an event with an empty data field (the priming
// event of the 2025-11-25 transport, SEP-1699, which carries only an event
// id) is skipped, as the SDK's client skips it; the direct path took it
// for a malformed message and failed every call of such an upstream.
func TestAttack3PrimingEvent(t *testing.T) {
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, id string, args map[string]any) bool {
		if args["name"] != "primed" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 0\ndata: \n\n"+
			`data: {"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"name\":\"primed\",\"text\":\"ok\"}"}]}}`+"\n\n")
		return true
	})
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "primed"}); res.IsError || text(res) != `{"name":"primed","text":"ok"}` {
		t.Errorf("a call whose answer follows a priming event: %s", text(res))
	}
}

// TestAttack3RebindingHost: the SDK's handler refuses a request that
// arrived on a loopback address under another Host (DNS rebinding
// protection: a web page whose name now resolves to 127.0.0.1) with 403;
// the direct path, in front of it, served the call.
func TestAttack3RebindingHost(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g) // httptest listens on 127.0.0.1
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Host = "rebound.example.com"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"},"_meta":{"progressToken":"p"}}}`); code != http.StatusForbidden {
		t.Fatalf("the SDK answered HTTP %d: the test shows nothing", code)
	}
	if code := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`); code != http.StatusForbidden {
		t.Errorf("the direct path answered HTTP %d under a rebound Host, want the SDK's 403", code)
	}
	if n := len(up.seen()); n != 0 {
		t.Errorf("the upstream ran %d calls under a rebound Host", n)
	}
}

// initializeRaw starts a session with a raw initialize that asks for
// version, and returns its id and the version the gateway answered.
func initializeRaw(t *testing.T, url, token, version string) (session, negotiated string) {
	t.Helper()
	post := func(sessionID, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sessionID != "" {
			req.Header.Set("Mcp-Session-Id", sessionID)
			req.Header.Set("Mcp-Protocol-Version", negotiated)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	session = resp.Header.Get("Mcp-Session-Id")
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			raw = []byte(d)
		}
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || session == "" {
		t.Fatalf("initialize: %s (%v)", raw, err)
	}
	negotiated = m.Result.ProtocolVersion
	resp = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", session)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return session, negotiated
}

// TestAttack3NegotiatedVersion: the direct path compared the request's
// Mcp-Protocol-Version with the version the client asked for in its
// initialize, not the one the gateway answered. A client that asked for a
// version the front does not speak (a newer one, an older one) and then
// names it in the header is refused by the SDK (HTTP 400: unsupported, or
// stateless-only); the direct path ran its calls.
func TestAttack3NegotiatedVersion(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	for _, asked := range []string{"2099-01-01", "2026-07-28", "2024-01-01"} {
		session, negotiated := initializeRaw(t, url, "alice-token", asked)
		if negotiated == asked {
			t.Fatalf("the gateway agreed to %s: the test shows nothing", asked)
		}
		before := len(up.seenTool("read_note"))
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`
		viaSDK := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"},"_meta":{"progressToken":"p"}}}`
		codeS, _, _ := postCall(t, url, "alice-token", session, asked, viaSDK)
		if codeS == http.StatusOK {
			t.Fatalf("asked %s: the SDK took the call: the test shows nothing", asked)
		}
		if code, ct, got := postCall(t, url, "alice-token", session, asked, body); code != codeS {
			t.Errorf("asked %s (answered %s), header %s: HTTP %d %s %v, where the SDK answers HTTP %d", asked, negotiated, asked, code, ct, got, codeS)
		}
		if n := len(up.seenTool("read_note")) - before; n != 0 {
			t.Errorf("asked %s: the upstream ran %d calls the SDK refuses", asked, n)
		}
		// The negotiated version is served (on the direct path).
		if code, ct, _ := postCall(t, url, "alice-token", session, negotiated, body); code != http.StatusOK || ct != "application/json" {
			t.Errorf("asked %s, header %s (negotiated): HTTP %d %s, want the direct path's 200", asked, negotiated, code, ct)
		}
	}
}

// TestAttack3DuplicateInitialize: a second initialize on an open session
// (which the SDK refuses: duplicate) made the front uncount the session
// from WithMaxSessions, while it stays open with its upstream session: a
// caller could open any number of sessions (and, for a command upstream,
// of child processes), two at a time.
func TestAttack3DuplicateInitialize(t *testing.T) {
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxSessions(4, 2))
	url := serve(t, g)
	var open []*mcp.ClientSession
	for i := 0; i < 4; i++ {
		cs, err := tryConnect(t, url, "alice-token", nil)
		if err != nil {
			break
		}
		open = append(open, cs)
		// The same initialize again, on the session.
		version := cs.InitializeResult().ProtocolVersion
		code, _, got := postCall(t, url, "alice-token", cs.ID(), version,
			`{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"again","version":"1"}}}`)
		if code == http.StatusOK && got["error"] == nil {
			t.Fatalf("a second initialize was accepted: %v", got)
		}
	}
	if len(open) > 2 {
		t.Errorf("alice has %d sessions open, her bound is 2", len(open))
	}
	for _, cs := range open {
		if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Errorf("a read on an open session: %s", text(res))
		}
	}
}

// TestAttack3ForeignTouch: a POST on alice's session that the SDK refuses
// (bob's token: 403) counted as a POST the SDK saw, so the direct path
// kept alice's calls to itself while the SDK saw none of them and closed
// her busy session as idle (WithSessionTimeout): anyone with a token and
// her session id could end it.
func TestAttack3ForeignTouch(t *testing.T) {
	_, upURL := httpUpstream(t)
	const timeout = 2 * time.Second
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithSessionTimeout(timeout), gateway.WithCallTimeout(timeout/8))
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(timeout / 20):
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer bob-token")
			req.Header.Set("Mcp-Session-Id", cs.ID())
			req.Header.Set("Mcp-Protocol-Version", version)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`
	direct := 0
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); time.Sleep(timeout / 10) {
		code, ct, got := postCall(t, url, "alice-token", cs.ID(), version, body)
		if code != http.StatusOK {
			t.Fatalf("alice's busy session was closed: HTTP %d %v", code, got)
		}
		if ct == "application/json" {
			direct++
		}
	}
	if direct == 0 {
		t.Fatal("no call of alice's took the direct path: the test shows nothing")
	}
}
