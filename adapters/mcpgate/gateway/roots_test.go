package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestRootsChangedBounded: a client's notifications/roots/list_changed is
// passed to the upstream within WithCallTimeout, as a call is: an upstream
// that does not take it loses the request, and the session goes on.
func TestRootsChangedBounded(t *testing.T) {
	_, sdk := notesHandler()
	arrived, gaveUp := make(chan struct{}, 1), make(chan struct{}, 1)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("notifications/roots/list_changed")) {
			arrived <- struct{}{}
			select { // an upstream that never takes it
			case <-r.Context().Done():
				gaveUp <- struct{}{}
			case <-release:
			}
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithCallTimeout(500*time.Millisecond))
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := client.Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: serve(t, g), HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	t.Cleanup(func() { close(release) }) // first: a failing test does not hang on the upstream
	// The upstream session is up.
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read: %s", text(res))
	}
	client.AddRoots(&mcp.Root{URI: "file:///srv/notes"})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the roots notification did not reach the upstream")
	}
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway still waits for the upstream to take the notification, past WithCallTimeout")
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("read after the notification: %s", text(res))
	}
}
