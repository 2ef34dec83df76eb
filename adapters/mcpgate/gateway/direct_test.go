package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDirectCallSurvivesSlowFirstConnect: a direct call that waits for its
// session's first upstream connection succeeds, the session kept.
//
// The fault: a direct call waits for the session's first upstream connection
// (callTool: l.session), which WithCallTimeout does not bound
// (WithConnectTimeout does). The SDK, which sees none of the direct call,
// closed the busy session as idle meanwhile, and the call was refused as
// upstream_unavailable. Through the SDK its POST holds the SDK's idle timer.
func TestDirectCallSurvivesSlowFirstConnect(t *testing.T) {
	t.Parallel()
	_, sdk := notesHandler()
	var slow atomic.Bool
	const timeout = 2 * time.Second
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			// A slow initialize, an upstream that loads a while: it must
			// outlast the go-sdk's idle timer, which runs in real time.
			time.Sleep(timeout + timeout/2)
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithSessionTimeout(timeout), gateway.WithCallTimeout(timeout/8))
	url := serve(t, g)
	slow.Store(true)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`
	code, _, got := postCall(t, url, "alice-token", cs.ID(), version, body)
	if code != http.StatusOK {
		t.Fatalf("the call answered HTTP %d %v", code, got)
	}
	if r, _ := got["result"].(map[string]any); r == nil || r["isError"] == true {
		t.Errorf("the call, busy all along, was refused: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil && strings.Contains(err.Error(), "not found") {
		t.Errorf("the SDK closed the session while its call ran: %v", err)
	} else if err != nil {
		t.Errorf("tools/list after the call: %v", err)
	}
}

// upstreamIDs records the JSON-RPC ids of the tools/call requests an
// upstream receives, by tool.
type upstreamIDs struct {
	next http.Handler
	mu   sync.Mutex
	ids  map[string][]string
}

func (u *upstreamIDs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			u.mu.Lock()
			if u.ids == nil {
				u.ids = map[string][]string{}
			}
			u.ids[m.Params.Name] = append(u.ids[m.Params.Name], string(m.ID))
			u.mu.Unlock()
		}
	}
	u.next.ServeHTTP(w, r)
}

func (u *upstreamIDs) of(tool string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.ids[tool]...)
}

// TestDirectPath: a read is answered by the gateway itself (one JSON body,
// where the SDK's server answers with an event stream) and reaches the
// upstream as the gateway's own request (a string id, where the SDK's
// client numbers its requests); a write that needs confirmation goes
// through the SDK, which can ask the person. Both are enforced alike.
func TestDirectPath(t *testing.T) {
	t.Parallel()
	up, sdk := notesHandler()
	ids := &upstreamIDs{next: sdk}
	hs := httptest.NewServer(ids)
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "")
	w := &wire{}
	cs := connectVia(t, serve(t, g), "alice-token", w, &mcp.ClientOptions{ElicitationHandler: accept})

	res := call(t, cs, "read_note", map[string]any{"name": "hello"})
	if res.IsError || text(res) != `{"name":"hello","text":"world"}` {
		t.Fatalf("read: %s", text(res))
	}
	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": strings.Repeat("n", 41)}), "AXAG_OUT_OF_RANGE", "")
	if got := w.answers("read_note"); len(got) != 2 || got[0] != "application/json" || got[1] != "application/json" {
		t.Errorf("the reads were answered as %v, want two JSON bodies (the direct path)", got)
	}
	if got := ids.of("read_note"); len(got) != 1 || !strings.HasPrefix(got[0], `"axgate-`) {
		t.Errorf("the upstream got the read with the ids %v, want one of the gateway's own", got)
	}

	if res := call(t, cs, "write_note", map[string]any{"name": "n", "text": "t"}); res.IsError {
		t.Fatalf("the confirmed write was refused: %s", text(res))
	}
	if got := w.answers("write_note"); len(got) == 0 || !strings.HasPrefix(got[0], "text/event-stream") {
		t.Errorf("the write was answered as %v, want the SDK's event stream (it asks the person)", got)
	}
	if len(up.seenTool("write_note")) != 1 {
		t.Errorf("the confirmed write did not reach the upstream once")
	}
}

// TestDirectAnswersAsTheSDK: the same calls, once on the direct path and
// once through the SDK (a progress token sends a call there), get the same
// JSON-RPC answer: results, refusals, an upstream's failure.
func TestDirectAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	for _, params := range []string{
		`{"name":"read_note","arguments":{"name":"hello"}}`,
		`{"name":"read_note","arguments":{"name":"nobody"}}`,
		`{"name":"read_note","arguments":{"name":42}}`,
		`{"name":"read_note","arguments":{"name":"broken"}}`,
		`{"name":"read_note"}`,
		`{"name":"fail_note","arguments":{}}`,
		`{"name":"read_note","arguments":{"name":"busy"}}`,
		`{"name":"read_note","arguments":{"name":"queued"}}`,
	} {
		direct := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
		viaSDK := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + strings.Replace(params, `{`, `{"_meta":{"progressToken":"p"},`, 1) + `}`
		codeD, ctD, gotD := postCall(t, url, "alice-token", cs.ID(), version, direct)
		codeS, ctS, gotS := postCall(t, url, "alice-token", cs.ID(), version, viaSDK)
		if codeD != 200 || codeS != 200 {
			t.Fatalf("%s: HTTP %d and %d", params, codeD, codeS)
		}
		if ctD != "application/json" || !strings.HasPrefix(ctS, "text/event-stream") {
			t.Errorf("%s: answered as %q and %q: the test does not compare the two paths", params, ctD, ctS)
		}
		rawD, _ := json.Marshal(gotD)
		rawS, _ := json.Marshal(gotS)
		if !bytes.Equal(rawD, rawS) {
			t.Errorf("%s:\ndirect %s\nSDK    %s", params, rawD, rawS)
		}
	}
}

// TestUpstreamToolErrorRetryable: an upstream's tool error is retryable
// only when the upstream says so or its text names a passing cause, on the
// direct path and through the SDK alike; otherwise it is not, keeps the
// upstream's text, and does not tell the agent to try again later.
func TestUpstreamToolErrorRetryable(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	for _, tc := range []struct {
		params, text string
		retryable    bool
	}{
		{`{"name":"read_note","arguments":{"name":"nobody"}}`, "no note named nobody", false},
		{`{"name":"fail_note","arguments":{}}`, "disk full on /var/notes", false},
		{`{"name":"read_note","arguments":{"name":"busy"}}`, "ETIMEDOUT", true},
		{`{"name":"read_note","arguments":{"name":"queued"}}`, "the queue is full", true},
	} {
		for path, params := range map[string]string{"direct": tc.params, "SDK": strings.Replace(tc.params, `{`, `{"_meta":{"progressToken":"p"},`, 1)} {
			_, _, got := postCall(t, url, "alice-token", cs.ID(), version, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+params+`}`)
			res, _ := got["result"].(map[string]any)
			sc, _ := res["structuredContent"].(map[string]any)
			e, _ := sc["error"].(map[string]any)
			d, _ := e["details"].(map[string]any)
			if e["code"] != "AXGATE_TOOL_FAILED" || !strings.Contains(fmt.Sprint(e["message"]), tc.text) {
				t.Errorf("%s %s: %v", path, tc.params, e)
				continue
			}
			if d["retryable"] != tc.retryable {
				t.Errorf("%s %s: retryable %v, want %v", path, tc.params, d["retryable"], tc.retryable)
			}
			if action := fmt.Sprint(d["agent_action"]); !tc.retryable && strings.Contains(action, "try again later") {
				t.Errorf("%s %s: agent_action %q", path, tc.params, action)
			}
		}
	}
}

// TestDirectSessionUser: a session started by alice is not served to bob's
// token on the direct path either (the SDK answers 403).
func TestDirectSessionUser(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`
	if code, ct, _ := postCall(t, url, "alice-token", cs.ID(), version, body); code != 200 || ct != "application/json" {
		t.Fatalf("alice on her session: HTTP %d %s", code, ct)
	}
	if code, _, _ := postCall(t, url, "bob-token", cs.ID(), version, body); code != http.StatusForbidden {
		t.Errorf("bob on alice's session: HTTP %d, want 403", code)
	}
	if code, _, _ := postCall(t, url, "alice-token", cs.ID(), "1999-01-01", body); code == 200 {
		t.Errorf("a protocol version the session did not negotiate was served")
	}
	if code, _, _ := postCall(t, url, "alice-token", "no-such-session", version, body); code != http.StatusNotFound {
		t.Errorf("an unknown session: HTTP %d, want 404", code)
	}
	if n := len(up.seenTool("read_note")); n != 1 {
		t.Errorf("the upstream saw %d reads, want alice's one", n)
	}
}

// TestDirectSessionTimeout: a session whose calls all could take the
// direct path is not closed as idle by the SDK, which sees none of them
// (WithSessionTimeout); a session that is idle still is; and with a call
// timeout that a call could outlast the SDK's timer by, no call takes the
// direct path.
func TestDirectSessionTimeout(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	const timeout = 4 * time.Second // a call may take timeout/8 under -race on a busy machine
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithSessionTimeout(timeout), gateway.WithCallTimeout(timeout/8))
	url := serve(t, g)
	w := &wire{}
	cs := connectVia(t, url, "alice-token", w, nil)
	// Calls spread over twice the SDK's idle timeout: that timer is the
	// go-sdk's, in real time on a real listener, with no hook to drive it.
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); time.Sleep(timeout / 10) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "hello"}})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("a call of a busy session failed: %v %v", err, res)
		}
	}
	direct := 0
	for _, ct := range w.answers("read_note") {
		if ct == "application/json" {
			direct++
		}
	}
	if direct == 0 {
		t.Fatal("no call took the direct path: the test shows nothing")
	}
	// Idle now: the SDK closes it, once its idle timer (real time, the
	// go-sdk's, with no hook) has run out.
	time.Sleep(timeout + timeout/2)
	version := cs.InitializeResult().ProtocolVersion
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`
	if code, _, _ := postCall(t, url, "alice-token", cs.ID(), version, body); code != http.StatusNotFound {
		t.Errorf("an idle session answered HTTP %d, want 404 (closed)", code)
	}

	// A call may last 60 s (the default WithCallTimeout), more than an
	// eighth of this session timeout: every call goes to the SDK.
	g2 := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithSessionTimeout(timeout))
	w2 := &wire{}
	cs2 := connectVia(t, serve(t, g2), "alice-token", w2, nil)
	for range 3 {
		if res := call(t, cs2, "read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Fatalf("read: %s", text(res))
		}
	}
	for _, ct := range w2.answers("read_note") {
		if ct == "application/json" {
			t.Errorf("a call took the direct path with a call timeout longer than an eighth of the session timeout")
		}
	}
}

// craftedUpstream answers some of the gateway's own tools/call requests of
// read_note itself, by the note's name, and passes everything else to the
// notes upstream: "stream" gets an event stream with what an upstream may
// send before its answer, "rpcerror" a JSON-RPC error, "lost" the 404 of a
// session the upstream forgot.
func craftedUpstream(t *testing.T) (*notes, string) {
	t.Helper()
	return rawUpstream(t, func(w http.ResponseWriter, _ *http.Request, id string, args map[string]any) bool {
		switch args["name"] {
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			events := ": a comment\r\n\r\n" +
				"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"reading\"}}\r\n\r\n" +
				"event: other\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"not a message event\"}]}}\r\n\r\n" +
				"data: {\"jsonrpc\":\"2.0\",\"id\":\"someone-else\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"another call's\"}]}}\r\n\r\n" +
				"id: 7\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:  \"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"name\\\":\\\"stream\\\",\\\"text\\\":\\\"ok\\\"}\"}]}}\r\n\r\n"
			io.WriteString(w, events)
		case "rpcerror":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32000,"message":"database down"}}`)
		case "lost":
			http.Error(w, "session not found", http.StatusNotFound)
		default:
			return false
		}
		return true
	})
}

// TestDirectUpstreamAnswers: what an upstream sends on a call's event stream
// before its answer is handled (a log message reaches the client; another
// request's answer and a non-message event are not taken for this call's),
// a JSON-RPC error is the tool's failure, and a session the upstream forgot
// is connected again.
func TestDirectUpstreamAnswers(t *testing.T) {
	t.Parallel()
	_, upURL := craftedUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	logs := make(chan string, 4)
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if s, ok := req.Params.Data.(string); ok {
				logs <- s
			}
		},
	})

	res := call(t, cs, "read_note", map[string]any{"name": "stream"})
	if res.IsError || text(res) != `{"name":"stream","text":"ok"}` {
		t.Fatalf("the streamed answer: %s", text(res))
	}
	select {
	case got := <-logs:
		if got != "reading" {
			t.Errorf("the client got the log message %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Error("the upstream's log message did not reach the client")
	}

	r := wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "rpcerror"}), "AXGATE_TOOL_FAILED", "")
	if !strings.Contains(r.Message, "database down") {
		t.Errorf("the upstream's error is not kept: %q", r.Message)
	}

	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "lost"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
	var last *mcp.CallToolResult
	if !eventually(20*time.Second, func() bool {
		last = call(t, cs, "read_note", map[string]any{"name": "hello"})
		return !last.IsError
	}) {
		t.Fatalf("no new upstream session after the lost one: %s", text(last))
	}
}

// TestUpstreamWithoutSessions: an upstream that refuses the protocol
// version with sessions is connected with the SDK's own choice (the
// stateless protocol), and its calls take the direct path's one POST
// (the direct path's own request ids), as the SDK's client writes them
// (TestDirectConformance's upstream_stateless cases).
func TestUpstreamWithoutSessions(t *testing.T) {
	t.Parallel()
	n := newNotes()
	srv := n.server()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ids := &upstreamIDs{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32602,"message":"only the stateless protocol here"}}`)
				return
			}
		}
		sdk.ServeHTTP(w, r)
	})}
	hs := httptest.NewServer(ids)
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	res := call(t, cs, "read_note", map[string]any{"name": "hello"})
	if res.IsError || text(res) != `{"name":"hello","text":"world"}` {
		t.Fatalf("read: %s", text(res))
	}
	if got := ids.of("read_note"); len(got) != 1 || !strings.HasPrefix(got[0], `"axgate-`) {
		t.Errorf("the upstream got the read with the ids %v, want one of the direct path's", got)
	}
}

// TestDirectCancel: a client's notifications/cancelled of a call on the
// direct path ends the call at the upstream (which the SDK, which never
// saw the call, would not do), and an id already in flight on the session
// is refused as the SDK refuses it.
func TestDirectCancel(t *testing.T) {
	t.Parallel()
	up, sdk := notesHandler()
	ids := &upstreamIDs{next: sdk}
	hs := httptest.NewServer(ids)
	t.Cleanup(hs.Close)
	t.Cleanup(up.unstall) // a failing test does not hang on the stalled call
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	version := cs.InitializeResult().ProtocolVersion

	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", version)
		return http.DefaultClient.Do(req)
	}
	stall := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"stall"}}}`
	answered := make(chan string, 1)
	go func() {
		resp, err := post(stall)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		answered <- resp.Header.Get("Content-Type")
	}()
	select {
	case <-up.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalling call did not reach the upstream")
	}
	if got := ids.of("read_note"); len(got) != 1 || !strings.HasPrefix(got[0], `"axgate-`) {
		t.Fatalf("the upstream got the call with the ids %v: not the direct path", got)
	}

	// The same id while it is in flight: refused as the SDK refuses it.
	code, _, _ := postCall(t, url, "alice-token", cs.ID(), version, stall)
	if code != http.StatusBadRequest {
		t.Errorf("a second call with the id in flight: HTTP %d, want 400", code)
	}

	resp, err := post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"the person changed their mind"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the cancellation: HTTP %d, want 202 (from the SDK)", resp.StatusCode)
	}
	select {
	case <-up.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's call was not cancelled")
	}
	select {
	case ct := <-answered:
		if ct != "application/json" {
			t.Errorf("the cancelled call was answered with %q", ct)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call was not answered")
	}

	// The id is free again once its call has ended.
	if code, ct, m := postCall(t, url, "alice-token", cs.ID(), version,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`); code != 200 || ct != "application/json" || m["result"] == nil {
		t.Errorf("the id after its call ended: HTTP %d %s %v", code, ct, m)
	}
}
