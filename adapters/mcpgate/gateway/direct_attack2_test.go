package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// Attacks on the changes after attack 3: the direct
// upstream call's contexts, the session-timeout rule.

// TestAttack4SlowFirstConnect: a direct call waits for the session's
// first upstream connection (callTool: l.session), which WithCallTimeout
// does not bound (WithConnectTimeout does). The SDK, which sees none of
// the direct call, closed the busy session as idle meanwhile, and the call
// was refused as upstream_unavailable. Through the SDK its POST holds the
// SDK's idle timer.
func TestAttack4SlowFirstConnect(t *testing.T) {
	_, sdk := notesHandler()
	var slow atomic.Bool
	const timeout = 2 * time.Second
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			time.Sleep(timeout + timeout/2) // a slow initialize: an upstream that loads a while
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
