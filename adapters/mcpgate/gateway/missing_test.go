package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// notOfferedLines counts the warnings about archive_note, the manifest's
// tool that no upstream offers.
func notOfferedLines(lg *logs) int {
	n := 0
	for _, line := range strings.Split(lg.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "does not offer") && strings.Contains(line, "tool=archive_note") {
			n++
		}
	}
	return n
}

// TestMissingToolLogged: a manifest tool the upstream does not offer is
// logged, naming it, when the gateway starts and again when the upstream's
// tools are listed again; the tools it offers are not.
func TestMissingToolLogged(t *testing.T) {
	up, upURL := httpUpstream(t)
	var lg logs
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	if n := notOfferedLines(&lg); n != 1 {
		t.Fatalf("at start, %d warnings name archive_note, want 1:\n%s", n, lg.String())
	}
	if strings.Contains(lg.String(), "tool=read_note") {
		t.Errorf("a tool the upstream offers is logged as missing:\n%s", lg.String())
	}
	changed := make(chan struct{}, 10)
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read_note: %s", text(res))
	}
	before := notOfferedLines(&lg)
	up.rugPull() // notifications/tools/list_changed: a re-list
	select {
	case <-changed: // the session's re-list is done
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told that the tools changed")
	}
	if n := notOfferedLines(&lg); n <= before {
		t.Errorf("the re-list did not log archive_note (%d warnings before, %d after):\n%s", before, n, lg.String())
	}
}
