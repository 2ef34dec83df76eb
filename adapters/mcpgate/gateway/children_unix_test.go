//go:build unix

package gateway_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestStopKillsOwnGroupHelper: stopping a child stops a helper it started in
// a process group of its own within its session.
//
// The fault: the gateway stops a command upstream's child by signalling its
// process group (ownGroup, signalGroup in procgroup_unix.go). A process the
// child starts in a process group of its own, without leaving the session
// (setpgid, not setsid: Go's exec with SysProcAttr.Setpgid, as the gateway
// itself starts its children; Python's subprocess with process_group=0; a
// shell with job control, set -m), is in no group the gateway signals, and
// outlives the stop of the child, New, the session and Close. Unlike a
// daemon (setsid), it has not left the child's session, which the gateway
// could make the child's own (Setsid) and then stop whole: every process of
// that session, whatever its group. Here New's pin-checking child starts
// such a helper, and the helper still runs after New stopped the child.
func TestStopKillsOwnGroupHelper(t *testing.T) {
	t.Parallel()
	pids := pidFile(t)
	script := helperEnv + `=own-group "$TEST_BIN" </dev/null >/dev/null 2>&1 &
while [ ! -s "$PID_FILE" ]; do sleep 0.01; done
exec "$TEST_BIN"`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", pidsEnv + "=" + pids, "PID_FILE=" + pids, "TEST_BIN=" + os.Args[0]}}
	wantNewStopsAll(t, up, pids)
}

// helperUpstream is a command upstream whose child starts a helper process
// in the background (a language server, a browser, a daemon: what many
// stdio MCP servers do) that inherits the child's standard error, and then
// serves MCP itself. The helper runs in a session of its own (setsid), as
// a daemon does, out of reach of the signals to the child's process group.
// The helper's pids are appended to a file; the test kills them at its end.
func helperUpstream(t *testing.T) gateway.Upstream {
	t.Helper()
	pids := pidFile(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command to start a helper in a session of its own")
	}
	script := `setsid sleep 60 </dev/null >/dev/null & echo $! >>"$PID_FILE"; exec "$TEST_BIN"`
	return gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", "PID_FILE=" + pids, "TEST_BIN=" + os.Args[0]}}
}

// TestNewNotHeldByHelperHoldingStderr: New returns although a helper of its
// pin-checking child keeps the child's stderr open.
//
// The fault: the child of a command upstream started a background helper
// that keeps the child's standard error open. New closes its pin-checking
// child once it has checked it, and that close waits for exec.Cmd.Wait,
// which waits (no WaitDelay) until the copy of the child's stderr ends:
// until the helper exits. So New, and with it axgate mcp's start, hangs for
// as long as the helper lives (forever for a daemon).
func TestNewNotHeldByHelperHoldingStderr(t *testing.T) {
	t.Parallel()
	up := helperUpstream(t)
	type built struct {
		g   *gateway.Gateway
		err error
	}
	done := make(chan built, 1)
	go func() {
		g, err := newGatewayErr(t, up)
		done <- built{g, err}
	}()
	select {
	case b := <-done:
		if b.err != nil {
			t.Fatal(b.err)
		}
		b.g.Close()
	case <-time.After(15 * time.Second):
		// New returns once the helper is killed (helperUpstream's cleanup,
		// which runs after this one): close what it built then.
		t.Cleanup(func() {
			go func() {
				if b := <-done; b.g != nil {
					b.g.Close()
				}
			}()
		})
		t.Fatal("New did not return within 15 s: closing its pin-checking child waits for the child's helper to close stderr")
	}
}

// TestStopKillsWrapperChildren: stopping a command upstream's child stops
// the processes its wrapper (sh -c, npx) started.
//
// The fault: the command of an upstream is often a wrapper (sh -c, npx, uvx)
// whose own child does part of the work. The gateway stops "the child" with
// stdin closed, then SIGTERM and SIGKILL to that one process only
// (childStdin.Close): the wrapper's children are not in a process group the
// gateway signals, so they outlive it. Here New's pin-checking child is a
// shell that, after the server ended, still waits on a process of its own;
// New stops the shell, and the process runs on, orphaned, after New has
// returned: the children of a command upstream are not bounded by its
// sessions, nor stopped by Close.
func TestStopKillsWrapperChildren(t *testing.T) {
	t.Parallel()
	pids := pidFile(t)
	script := `"$TEST_BIN"; sleep 60 >/dev/null 2>&1 & echo $! >>"$PID_FILE"; wait`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", "PID_FILE=" + pids, "TEST_BIN=" + os.Args[0]}}
	wantNewStopsAll(t, up, pids)
}

// wantNewStopsAll starts a gateway in front of up, whose pin-checking child
// writes the pids of the processes it starts to pids, and checks that none
// of them runs once New has stopped that child.
func wantNewStopsAll(t *testing.T, up gateway.Upstream, pids string) {
	t.Helper()
	g, err := newGatewayErr(t, up)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	started := childPIDs(pids)
	if len(started) == 0 {
		t.Fatal("the pin-checking child started no process")
	}
	for _, pid := range started {
		if stillRuns(pid) {
			t.Errorf("process %d, started by New's pin-checking child, still runs after New stopped that child", pid)
		}
	}
}

// TestNoChildBeforeInitialize: requests on a session that is not initialized
// start no child process.
//
// The fault: the SDK takes a few messages on a session that is not
// initialized: notifications (only calls are refused before initialize) and
// the calls logging/setLevel, resources/subscribe and resources/unsubscribe
// (server.go handle skips its initialization check for them); a POST without
// Mcp-Session-Id makes a new session for them. The front answers
// notifications/roots/list_changed and those calls by calling linkFor, which
// starts the session's upstream link: for a command upstream a new child
// process (for an HTTP upstream a new upstream session). Such a session was
// never admitted (admit runs at initialize), so WithMaxSessions, the
// documented bound of the children, does not count it: any caller with a
// token starts as many children at once as it sends such POSTs, beside the
// sessions the bound allows.
func TestNoChildBeforeInitialize(t *testing.T) {
	t.Parallel()
	startsFile := filepath.Join(t.TempDir(), "starts")
	up := stdioUpstream()
	up.Env = append(up.Env, startsFileEnv+"="+startsFile)
	g := newGateway(t, up, "", gateway.WithMaxSessions(1, 1))
	url := serve(t, g)
	starts := func() int {
		raw, _ := os.ReadFile(startsFile)
		return strings.Count(string(raw), "\n")
	}
	before := starts() // New's pin-checking child
	bodies := []string{
		// A batch (no Mcp-Protocol-Version: 2025-03-26, which has them):
		// the ping keeps the POST, and so the session, open until the
		// notification before it has been handled.
		`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"notes://readme"}}`,
	}
	var wg sync.WaitGroup
	for _, body := range bodies {
		for range 2 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer alice-token")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	wg.Wait()
	// The one session the bound allows starts the one child it may.
	cs := connect(t, url, "alice-token", nil)
	pidOf(t, cs)
	// A child writes its line first thing; one started for a POST above
	// may still be on its way: wait a little for it. A sleep, on purpose:
	// this checks that a real child process does not start, and no event
	// marks a start that does not happen.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := starts() - before; n > 1 {
			t.Fatalf("six POSTs without a session (no initialize), and one session under WithMaxSessions(1, 1), started %d upstream children", n)
		}
	}
}

// stillRuns reports whether process pid still runs a moment after it was
// signalled: a signalled process ends when it is next scheduled, which on
// a busy machine can take a while.
func stillRuns(pid int) bool {
	return !eventually(5*time.Second, func() bool { return !running(pid) })
}
