package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCloseCancelsPendingElicitation: Close returns while an upstream
// question to the client is still unanswered.
//
// The fault: a request of the upstream to the client that the gateway passes
// on (elicitation/create here; sampling and roots/list alike) waits for the
// client's answer, and Close waits for it; a person who has not filled in
// the form yet, or a client that never answers, holds Close (axgate mcp's
// shutdown on SIGTERM or Ctrl-C) for as long as it likes. The upstream's
// ask_note asks the person during the call; the gateway's call reads the
// upstream's answer stream itself (callDirect, directup.go) and sends the
// question to the client from upstreamRequest (ServerSession.Elicit,
// directup.go:505) under the call's context, which Close does not cancel:
//   - "direct" (the call takes the front's direct path): Close stops the
//     upstream sessions, then closes the client sessions (gateway.go:248),
//     and the go-sdk's ServerSession.Close (jsonrpc2 Connection.Close)
//     waits until its outgoing calls are answered: the question;
//   - "sdk" (a progress token: the front's SDK path): the same, after a
//     first wait: Close's link.close (upstream.go:618) closes the upstream
//     session with a DELETE, which the upstream (a go-sdk server) answers
//     only once its own call in flight has ended, which waits for the
//     answer to its question: the go-sdk gives up on the DELETE after 5 s
//     (closeDeleteTimeout), and then the client session's close waits as
//     above.
//
// A fix: Close cancels every call in flight and every pending upstream
// request to a client (one gateway context they derive from) before it
// closes any session, and bounds each upstream session's close.
func TestCloseCancelsPendingElicitation(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"direct", "sdk"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			// Nothing here registers a cleanup that waits for the gateway
			// or the upstream: when Close hangs, the test fails and leaves
			// them (and the question) to the process's end.
			up := httptest.NewServer(func() http.Handler { _, h := notesHandler(); return h }())
			g := newGateway(t, gateway.Upstream{URL: up.URL}, "", gateway.AllowUpstreamElicitation())
			front := httptest.NewServer(g.Handler())
			asked := make(chan struct{}, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
				ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if req.Params.Message == "Which note?" {
						select {
						case asked <- struct{}{}:
						default:
						}
					}
					<-ctx.Done() // the person does not answer
					return nil, ctx.Err()
				},
			})
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
				Endpoint: front.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}},
			}, onSession)
			if err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "ask_note", Arguments: map[string]any{}}
			if path == "sdk" {
				params.SetProgressToken("p1") // a progress token: the SDK's path
			}
			go cs.CallTool(context.Background(), params)
			select {
			case <-asked:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream's question did not reach the client")
			}
			closed := make(chan struct{})
			go func() {
				g.Close()
				close(closed)
			}()
			// Closing an HTTP upstream session is one DELETE, and the
			// client session's stream ends: Close needs milliseconds here
			// (8 s: more than the go-sdk's bound of the DELETE, 5 s).
			select {
			case <-closed:
				cs.Close()
				front.Close()
				up.Close()
			case <-time.After(8 * time.Second):
				t.Fatal("Close did not return within 8 s while the client had not answered the upstream's question")
			}
		})
	}
}
