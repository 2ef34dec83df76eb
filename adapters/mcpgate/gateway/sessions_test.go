package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRequestsBeforeInitializeRefused: requests without an initialized
// session start no upstream session.
//
// The fault: requests without an initialized session (no Mcp-Session-Id) are
// refused before they can start an upstream session, so that they do not
// escape WithMaxSessions.
func TestRequestsBeforeInitializeRefused(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxSessions(1, 1))
	url := serve(t, g)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"notes://readme"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s without a session: %d %s", body, resp.StatusCode, raw)
		}
	}
	if len(up.seen()) != 0 {
		t.Fatal("the upstream saw a call")
	}
	// The one session the bound allows is still there for alice.
	cs := connect(t, url, "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("alice's session: %s", text(res))
	}
}

// TestDuplicateInitializeKeepsSessionCounted: a refused second initialize
// leaves its session counted against WithMaxSessions.
//
// The fault: a second initialize on an open session (which the SDK refuses:
// duplicate) made the front uncount the session from WithMaxSessions, while
// it stays open with its upstream session: a caller could open any number of
// sessions (and, for a command upstream, of child processes), two at a time.
func TestDuplicateInitializeKeepsSessionCounted(t *testing.T) {
	t.Parallel()
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

// TestRefusedForeignPostKeepsSessionAlive: a POST on another caller's
// session that the SDK refuses neither ends nor touches that session.
//
// The fault: a POST on alice's session that the SDK refuses (bob's token:
// 403) counted as a POST the SDK saw, so the direct path kept alice's calls
// to itself while the SDK saw none of them and closed her busy session as
// idle (WithSessionTimeout): anyone with a token and her session id could
// end it.
func TestRefusedForeignPostKeepsSessionAlive(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	const timeout = 4 * time.Second // a call may take timeout/8 under -race on a busy machine
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
	// Calls spread over twice the SDK's idle timeout: that timer is the
	// go-sdk's, in real time on a real listener, with no hook to drive it.
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
