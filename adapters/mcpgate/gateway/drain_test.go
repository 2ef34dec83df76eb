package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDrainBoundedForStatelessUpstream: the bound on upstream streams read
// on after their answer holds for an upstream without sessions too.
//
// The fault: the bound of 256 event streams read on after their answer holds
// only on the direct path to the upstream. An upstream that gives its
// sessions no Mcp-Session-Id (a stateless server: directVersion is "" when
// cs.ID() is "") has every call sent through the SDK's client with
// upstreamContext, whose reads after the answer are not counted in draining:
// an upstream that keeps each stream open after its answer has the gateway
// hold one connection and goroutines per call for upstreamDrain (10 s), with
// no bound on how many.
func TestDrainBoundedForStatelessUpstream(t *testing.T) {
	t.Parallel()
	n := newNotes()
	srv := n.server()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var held, maxHeld atomic.Int64
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Arguments map[string]any `json:"arguments"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.Params.Arguments["name"] == "keep" {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"{\"name\":\"keep\",\"text\":\"x\"}"}]}}`+"\n\n")
				w.(http.Flusher).Flush()
				now := held.Add(1)
				for {
					old := maxHeld.Load()
					if now <= old || maxHeld.CompareAndSwap(old, now) {
						break
					}
				}
				select { // the stream stays open after the answer
				case <-r.Context().Done():
				case <-release:
				}
				held.Add(-1)
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithMaxCallsPerPrincipal(1000), gateway.WithMaxCallsPerSession(1000))
	cs := connect(t, serve(t, g), "alice-token", nil)
	t.Cleanup(func() { close(release) }) // first: the upstream's server closes without waiting
	const calls = 300
	start := time.Now()
	for i := range calls {
		res := callWithin(t, cs, "read_note", map[string]any{"name": "keep"})
		if res.IsError {
			t.Fatalf("call %d: %s", i, text(res))
		}
		if time.Since(start) > 8*time.Second {
			break
		}
	}
	// The upstream sees a stream the gateway let go of end a moment later.
	eventually(3*time.Second, func() bool { return held.Load() <= 256 })
	t.Logf("%d calls in %s; streams held open at once: %d (max %d)", calls, time.Since(start).Round(time.Millisecond), held.Load(), maxHeld.Load())
	if n := held.Load(); n > 256 {
		t.Errorf("the gateway keeps %d upstream streams open after their answer, past the bound of 256", n)
	}
}

// TestDrainBound: an upstream that keeps each call's event stream open
// after its answer does not get the gateway to keep a connection per call
// open (for up to 10 s each, so that calls pile them up): at most 256
// streams are read on after their answer; the others' connections are
// closed at once.
func TestDrainBound(t *testing.T) {
	t.Parallel()
	const calls, bound = 300, 256
	var open atomic.Int64
	release := make(chan struct{})
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, r *http.Request, id string, args map[string]any) bool {
		if args["name"] != "linger" {
			return false
		}
		open.Add(1)
		defer open.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"name\":\"linger\",\"text\":\"x\"}"}],"structuredContent":{"name":"linger","text":"x"}}}`+"\n\n")
		w.(http.Flusher).Flush()
		// The stream stays open until the gateway closes the connection
		// (the server then ends the request's context).
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	t.Cleanup(func() { close(release) }) // before the upstream's server is closed
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	for range calls {
		if res := call(t, cs, "read_note", map[string]any{"name": "linger"}); res.IsError {
			t.Fatalf("read: %s", text(res))
		}
	}
	eventually(5*time.Second, func() bool { return open.Load() <= bound })
	if n := open.Load(); n > bound {
		t.Errorf("%d of the upstream's streams are still open after %d calls, want at most %d", n, calls, bound)
	}
}
