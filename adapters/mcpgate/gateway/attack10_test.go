//go:build unix

package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// attack10Mode makes the test binary one of this file's processes (init,
// before TestMain): a child of a command upstream that misbehaves, or a
// process such a child starts.
const attack10Mode = "AXGATE_GATEWAY_TEST_ATTACK10"

// attack10PIDs names the file a process of attack10Mode appends its pid to.
const attack10PIDs = "AXGATE_GATEWAY_TEST_ATTACK10_PIDS"

func init() {
	switch os.Getenv(attack10Mode) {
	case "":
		return
	case "own-group":
		// A helper that its server starts in a process group of its own
		// (Go's exec with SysProcAttr.Setpgid, Python's process_group=0, a
		// shell's job control): it stays in the server's session.
		syscall.Setpgid(0, 0)
		appendPID()
		time.Sleep(60 * time.Second)
		os.Exit(0)
	}
}

func appendPID() {
	if f, err := os.OpenFile(os.Getenv(attack10PIDs), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		f.Close()
	}
}

// pidFile is a file for the pids of the processes a test's upstream
// starts (childPIDs reads it); the test kills them at its end.
func pidFile(t *testing.T) string {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	t.Cleanup(func() {
		for _, pid := range childPIDs(pids) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pids
}

// TestAttack10OwnGroupOutlivesStop: the gateway stops a command upstream's
// child by signalling its process group (ownGroup, signalGroup in
// procgroup_unix.go). A process the child starts in a process group of its
// own, without leaving the session (setpgid, not setsid: Go's exec with
// SysProcAttr.Setpgid, as the gateway itself starts its children; Python's
// subprocess with process_group=0; a shell with job control, set -m), is
// in no group the gateway signals, and outlives the stop of the child, New,
// the session and Close. Unlike a daemon (setsid), it has not left the
// child's session, which the gateway could make the child's own (Setsid)
// and then stop whole: every process of that session, whatever its group.
// Here New's pin-checking child starts such a helper, and the helper still
// runs after New stopped the child.
func TestAttack10OwnGroupOutlivesStop(t *testing.T) {
	pids := pidFile(t)
	script := attack10Mode + `=own-group "$AX10_BIN" </dev/null >/dev/null 2>&1 &
while [ ! -s "$AX10_PIDS" ]; do sleep 0.01; done
exec "$AX10_BIN"`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{upstreamEnv + "=stdio", attack10PIDs + "=" + pids, "AX10_PIDS=" + pids, "AX10_BIN=" + os.Args[0]}}
	wantNewStopsAll(t, up, pids)
}

// TestAttack10PendingElicitationHangsClose: a request of the upstream to
// the client that the gateway passes on (elicitation/create here; sampling
// and roots/list alike) waits for the client's answer, and Close waits for
// it; a person who has not filled in the form yet, or a client that never
// answers, holds Close (axgate mcp's shutdown on SIGTERM or Ctrl-C) for as
// long as it likes. The upstream's ask_note asks the person during the
// call; the gateway's call reads the upstream's answer stream itself
// (callDirect, directup.go) and sends the question to the client from
// upstreamRequest (ServerSession.Elicit, directup.go:505) under the call's
// context, which Close does not cancel:
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
func TestAttack10PendingElicitationHangsClose(t *testing.T) {
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
			}, nil)
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
