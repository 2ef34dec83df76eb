package gateway_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestDrainBound: an upstream that keeps each call's event stream open
// after its answer does not get the gateway to keep a connection per call
// open (for up to 10 s each, so that calls pile them up): at most 256
// streams are read on after their answer; the others' connections are
// closed at once.
func TestDrainBound(t *testing.T) {
	const calls, bound = 300, 256
	var open atomic.Int64
	release := make(chan struct{})
	_, upURL := rawUpstream(t, func(w http.ResponseWriter, id string, args map[string]any) bool {
		if args["name"] != "linger" {
			return false
		}
		open.Add(1)
		defer open.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"name\":\"linger\",\"text\":\"x\"}"}],"structuredContent":{"name":"linger","text":"x"}}}`+"\n\n")
		w.(http.Flusher).Flush()
		// The stream stays open, with a comment now and then, until the
		// gateway lets go of it (a write fails).
		for {
			select {
			case <-release:
				return true
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := io.WriteString(w, ": still here\n\n"); err != nil {
				return true
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return true
			}
		}
	})
	t.Cleanup(func() { close(release) }) // before the upstream's server is closed
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	for range calls {
		if res := call(t, cs, "read_note", map[string]any{"name": "linger"}); res.IsError {
			t.Fatalf("read: %s", text(res))
		}
	}
	for end := time.Now().Add(5 * time.Second); open.Load() > bound && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n > bound {
		t.Errorf("%d of the upstream's streams are still open after %d calls, want at most %d", n, calls, bound)
	}
}
