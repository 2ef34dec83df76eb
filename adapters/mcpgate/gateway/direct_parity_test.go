package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestUpstreamEventBoundedWhateverLineEnds: an upstream event is bounded by
// WithMaxMessageBytes however its lines end.
//
// The fault: an upstream's event is bounded by WithMaxMessageBytes however
// its lines end. boundedBody took "\n\r\r\n" for the blank line that ends an
// event and reset its count, where the event reader takes the line "\r" for
// a field and reads on: one event of any size was buffered and relayed (here
// 1 MiB past a 64 KiB bound; an upstream could send gigabytes within the
// call timeout). The event reader now ends a line at LF only, less its CRs,
// as the go-sdk client scans it (a line of CRs is blank there too): the
// stream here has lone CRs and no LF, which neither takes for a line end.
func TestUpstreamEventBoundedWhateverLineEnds(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, _ *http.Request, id string, args map[string]any) bool {
		if args["name"] != "crlf" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"name\":\"crlf\",\"text\":\"x\"}"}],"_meta":{"pad":[`+"\n")
		chunk := `data: "` + strings.Repeat("A", 16<<10) + `",` + "\r\r"
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

// TestDirectRefusesProtocolVersionMeta: the direct path refuses a call whose
// _meta names a protocol version, as the SDK does.
//
// The fault: a call whose _meta names a protocol version of its own
// (SEP-2575's io.modelcontextprotocol/protocolVersion) is refused by the SDK
// on a session of the front (HTTP 400, unsupported protocol version: the
// front is stateful); the direct path ran it and answered a result. Whatever
// the SDK makes of the protocol's own _meta keys is the SDK's to decide.
func TestDirectRefusesProtocolVersionMeta(t *testing.T) {
	t.Parallel()
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

// TestDirectSkipsPrimingEvent: the direct path skips an event with empty
// data, as the SDK's client does.
//
// The fault: an event with an empty data field (the priming event of the
// 2025-11-25 transport, SEP-1699, which carries only an event id) is
// skipped, as the SDK's client skips it; the direct path took it for a
// malformed message and failed every call of such an upstream.
func TestDirectSkipsPrimingEvent(t *testing.T) {
	t.Parallel()
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, _ *http.Request, id string, args map[string]any) bool {
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

// TestDirectRefusesRebindingHost: the direct path refuses a loopback request
// under another Host, as the SDK does.
//
// The fault: the SDK's handler refuses a request that arrived on a loopback
// address under another Host (DNS rebinding protection: a web page whose
// name now resolves to 127.0.0.1) with 403; the direct path, in front of it,
// served the call.
func TestDirectRefusesRebindingHost(t *testing.T) {
	t.Parallel()
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

// TestDirectChecksNegotiatedVersion: the direct path checks
// Mcp-Protocol-Version against the negotiated version, as the SDK does.
//
// The fault: the direct path compared the request's Mcp-Protocol-Version
// with the version the client asked for in its initialize, not the one the
// gateway answered. A client that asked for a version the front does not
// speak (a newer one, an older one) and then names it in the header is
// refused by the SDK (HTTP 400: unsupported, or stateless-only); the direct
// path ran its calls.
func TestDirectChecksNegotiatedVersion(t *testing.T) {
	t.Parallel()
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

// answerTypes records the content type of each answer to a tools/call POST.
type answerTypes struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []string
}

func (a *answerTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if err == nil && r.Header.Get("Mcp-Method") == "tools/call" {
		a.mu.Lock()
		a.got = append(a.got, resp.Header.Get("Content-Type"))
		a.mu.Unlock()
	}
	return resp, err
}

// TestStatelessDirectTakesTheGoSDKClientsCalls: a tools/call of the go-sdk's
// client on MCP 2026-07-28 takes the direct path (one JSON body, not the
// SDK's event stream), and its result, an allowed call's and a refused
// one's, is the one the gateway without the direct path answers.
//
// The fault it guards: the stateless direct path reading the SDK client's
// requests (its headers, its per-request _meta) otherwise than the SDK, so
// that every call falls back to the SDK (the direct path taken by no
// client) or is answered differently.
func TestStatelessDirectTakesTheGoSDKClientsCalls(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	results := map[string][]string{}
	for _, path := range []struct {
		name string
		opts []gateway.Option
		want string
	}{{"direct", nil, "application/json"}, {"sdk", []gateway.Option{gateway.WithoutDirect()}, "text/event-stream"}} {
		g := newGateway(t, gateway.Upstream{URL: upURL}, "", path.opts...)
		url := serve(t, g)
		types := &answerTypes{next: http.DefaultTransport}
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"alice-token", types}}, MaxRetries: -1,
		}, &mcp.ClientSessionOptions{ProtocolVersion: statelessVersion})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"read_note", map[string]any{"name": "hello"}},
			{"read_note", map[string]any{"name": 42}},
			{"fail_note", map[string]any{}},
		} {
			res := callWithin(t, cs, call.tool, call.args)
			raw, _ := json.Marshal(res)
			results[path.name] = append(results[path.name], string(volatile.ReplaceAllString(string(raw), `"$1":"…"`)))
		}
		types.mu.Lock()
		if len(types.got) != 3 {
			t.Errorf("%s: %d answers to tools/call seen, want 3", path.name, len(types.got))
		}
		for i, ct := range types.got {
			if mt, _, _ := mime.ParseMediaType(ct); mt != path.want {
				t.Errorf("%s: call %d answered as %q, want %q", path.name, i+1, ct, path.want)
			}
		}
		types.mu.Unlock()
	}
	for i := range results["sdk"] {
		if d, s := at(results["direct"], i), results["sdk"][i]; d != s {
			t.Errorf("call %d:\ndirect path %s\nSDK path    %s", i+1, d, s)
		}
	}
}
