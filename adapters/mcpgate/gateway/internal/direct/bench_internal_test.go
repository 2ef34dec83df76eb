package direct

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The direct path's own work on a call at the front, without the network
// or the chain: the checks of the request, the parse of its body (and, on
// MCP 2026-07-28, of its _meta), and the encoding of the answer. The tool
// answers at once what the benchmarks' read tool answers (a JSON text).
// What the gateway's front costs beyond a proxy that reads nothing, per
// call, and what a stateless call costs beyond a session's.

// benchDoc is the read tool's answer: JSON in a text block, as the go-sdk's
// typed tools write it.
const benchDoc = `{"path":"docs/intro.md","size":142,"text":"axgate enforces AXAG manifests on the tool calls of AI agents: intent, roles, parameters, constraints, rate limits, confirmations."}`

func benchResult() *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: benchDoc}}}
}

// benchSession is a session whose calls are answered at once.
type benchSession struct{ st *State }

func (s benchSession) State() *State                           { return s.st }
func (benchSession) Initialized() bool                         { return true }
func (benchSession) Ready(context.Context, time.Duration) bool { return true }
func (benchSession) CallTool(context.Context, *mcp.CallToolParamsRaw, *mcp.RequestExtra) (*mcp.CallToolResult, error) {
	return benchResult(), nil
}

type benchSessions struct{ s Session }

func (b benchSessions) Lookup(id string) Session {
	if id == "s1" {
		return b.s
	}
	return nil
}

func benchFront(b *testing.B, h http.Handler, r *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "axgate enforces") {
			b.Fatalf("HTTP %d: %s", w.Code, w.Body)
		}
	}
}

func benchRequest(body string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func notSDK(b *testing.B) http.Handler {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { b.Fatal("the call went to the SDK") })
}

// BenchmarkFrontSession: a tools/call of a session (MCP 2025-11-25) as the
// go-sdk's client writes it.
func BenchmarkFrontSession(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"path":"docs/intro.md"}}}`
	st := new(State)
	st.Register("", "2025-11-25")
	p := New(Config{Sessions: benchSessions{benchSession{st}}, Tools: map[string]bool{"read": true},
		Body: func(*http.Request) ([]byte, bool) { return []byte(body), true }})
	benchFront(b, p.Handler(notSDK(b)), benchRequest(body, map[string]string{"Mcp-Session-Id": "s1", "Mcp-Protocol-Version": "2025-11-25"}))
}

// BenchmarkFrontStateless: a tools/call of MCP 2026-07-28 (no session) as
// the go-sdk's client writes it: the protocol's _meta, and the Mcp-Method
// and Mcp-Name headers.
func BenchmarkFrontStateless(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"agent","version":"v1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"read","arguments":{"path":"docs/intro.md"}}}`
	p := New(Config{Tools: map[string]bool{"read": true}, StatelessTools: map[string]bool{"read": true}, StatelessVersions: []string{"2026-07-28"},
		StatelessCall: func(context.Context, *mcp.CallToolParamsRaw, *mcp.RequestExtra) (*mcp.CallToolResult, error) {
			return benchResult(), nil
		},
		ServerInfo: &mcp.Implementation{Name: "axgate", Version: "v0.1.0"},
		Body:       func(*http.Request) ([]byte, bool) { return []byte(body), true }})
	benchFront(b, p.Stateless(notSDK(b)), benchRequest(body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "read"}))
}

// answerAtOnce answers every tools/call POST with the read tool's result,
// as an event stream (the go-sdk server's answer) or a JSON body, without a
// network.
type answerAtOnce struct{ sse bool }

func (a answerAtOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	i := bytes.Index(body, []byte(`"id":`)) + len(`"id":`)
	j := i + bytes.IndexByte(body[i+1:], '"') + 2
	doc, _ := json.Marshal(benchDoc)
	msg := `{"jsonrpc":"2.0","id":` + string(body[i:j]) + `,"result":{"content":[{"type":"text","text":` + string(doc) + `}]}}`
	ct := "application/json"
	if a.sse {
		ct, msg = "text/event-stream", "event: message\ndata: "+msg+"\n\n"
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {ct}},
		Body: io.NopCloser(strings.NewReader(msg)), ContentLength: int64(len(msg)), Request: r}, nil
}

// BenchmarkUpstreamCall: Call's own work on a call to the upstream:
// writing the request, reading the answer (an event stream or a JSON
// body) and decoding the result, the upstream answering at once.
func BenchmarkUpstreamCall(b *testing.B) {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "v1"}, nil)
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gw", Version: "v1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for _, sse := range []bool{true, false} {
		b.Run(map[bool]string{true: "upstream=sse", false: "upstream=json"}[sse], func(b *testing.B) {
			p := New(Config{URL: "http://upstream.test/mcp", HTTPClient: &http.Client{Transport: answerAtOnce{sse: sse}},
				MaxMessageBytes: 1 << 20, Bound: func(*http.Response) {}, Drains: new(Drains)})
			up := Upstream{Session: cs, Version: "2025-11-25", Life: ctx}
			b.ReportAllocs()
			for b.Loop() {
				res, err := p.Call(ctx, up, &mcp.CallToolParams{Name: "read", Arguments: json.RawMessage(`{"path":"docs/intro.md"}`)})
				if err != nil || len(res.Content) != 1 {
					b.Fatal(err, res)
				}
			}
		})
	}
}
