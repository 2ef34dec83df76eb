package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioUpstreamRestart: a command upstream served to a local client
// (the gateway's stdio front, over in-memory pipes here): the child is
// started per session, restarted after it is killed (calls in between are
// refused as unavailable), and stopped on Close.
func TestStdioUpstreamRestart(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stdioUpstream(), "", gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}}))
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- gateway.ServeLocal(g, ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, &mcp.ClientOptions{ElicitationHandler: accept}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if got, want := listNames(t, cs), []string{"read_note", "write_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
		t.Errorf("the local user lists %v, want %v", got, want)
	}
	if res := call(t, cs, "write_note", map[string]any{"name": "k", "text": "v"}); res.IsError {
		t.Fatalf("write: %s", text(res))
	}
	res := call(t, cs, "read_note", map[string]any{"name": "k"})
	if res.IsError || text(res) != `{"name":"k","text":"v"}` {
		t.Fatalf("read: %s", text(res))
	}

	pid := pidOf(t, cs)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")

	if !eventually(20*time.Second, func() bool {
		res := call(t, cs, "read_note", map[string]any{"name": "hello"})
		if !res.IsError {
			return true
		}
		wantRefusal(t, res, "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
		return false
	}) {
		t.Fatal("the upstream was not restarted")
	}
	newPID := pidOf(t, cs)
	if newPID == pid {
		t.Fatal("the same process answers after it was killed")
	}
	// A new child: the note written to the old one is gone.
	if res := call(t, cs, "read_note", map[string]any{"name": "k"}); !res.IsError {
		t.Errorf("the new child knows the old one's note: %s", text(res))
	}

	g.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Error("ServeLocal did not return after Close")
	}
	if !eventually(10*time.Second, func() bool { return !alive(newPID) }) {
		t.Fatalf("the child %d still runs after Close", newPID)
	}
}

// TestStdioUpstreamPerSession: over HTTP, each client session has its own
// child.
func TestStdioUpstreamPerSession(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stdioUpstream(), "")
	url := serve(t, g)
	a := connect(t, url, "alice-token", nil)
	b := connect(t, url, "bob-token", nil)
	pa, pb := pidOf(t, a), pidOf(t, b)
	if pa == pb {
		t.Errorf("two sessions share the child %d", pa)
	}
	a.Close()
	if !eventually(10*time.Second, func() bool { return !alive(pa) }) {
		t.Fatalf("the child %d of a closed session still runs", pa)
	}
	if !alive(pb) {
		t.Error("closing one session stopped another's child")
	}
}

// TestStdioUpstreamAsksThePerson: a command upstream's question to the
// person during a call (elicitation) reaches the client and its answer the
// upstream. The gateway's upstream sessions ask for protocol 2025-11-25,
// with sessions, for a command upstream as for an HTTP one: on the go-sdk's
// default, the stateless 2026-07-28, a go-sdk server cannot send a request
// while it serves a call, and the question failed.
func TestStdioUpstreamAsksThePerson(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stdioUpstream(), "", gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}}), gateway.AllowUpstreamElicitation())
	cs := localSession(t, g, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
	if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
		t.Errorf("the upstream's question did not reach the person: %s", text(res))
	}
}

// TestStdioSessionOneChild: one local (stdio) client session of a command
// upstream runs one child. New starts none of its own (it used to start
// one to check the pins and learn the upstream's capabilities, then the
// session started a second): the session's child, started at the client's
// initialize with what the client offers (here elicitation), checks the
// pins before the initialize is answered, so before any call. An upstream
// that does not start fails the client's initialize with why; a program
// that does not exist fails New.
func TestStdioSessionOneChild(t *testing.T) {
	t.Parallel()
	local := gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}})
	counted := func(t *testing.T) (gateway.Upstream, func() int) {
		startsFile := filepath.Join(t.TempDir(), "starts")
		up := stdioUpstream()
		up.Env = append(up.Env, startsFileEnv+"="+startsFile)
		return up, func() int {
			raw, _ := os.ReadFile(startsFile)
			return strings.Count(string(raw), "\n")
		}
	}
	t.Run("one session, one child", func(t *testing.T) {
		up, starts := counted(t)
		g := newGateway(t, up, "", local, gateway.AllowUpstreamElicitation())
		if n := starts(); n != 0 {
			t.Errorf("New started %d children before any session", n)
		}
		cs := localSession(t, g, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
		if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Fatalf("read: %s", text(res))
		}
		// The child was told what the client offers.
		if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
			t.Errorf("the upstream's question did not reach the person: %s", text(res))
		}
		if n := starts(); n != 1 {
			t.Errorf("one stdio session started %d children, want 1", n)
		}
	})
	t.Run("pins checked before the first call", func(t *testing.T) {
		up, starts := counted(t)
		g := newGateway(t, up, strings.Repeat("0", 64), local)
		cs := localSession(t, g, nil)
		if got := listNames(t, cs); slices.Contains(got, "write_note") {
			t.Errorf("a tool whose pin does not match is listed: %v", got)
		}
		wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "k", "text": "v"}), "AXGATE_TOOL_CHANGED", "")
		if n := starts(); n != 1 {
			t.Errorf("one stdio session started %d children, want 1", n)
		}
	})
	t.Run("an upstream that does not start", func(t *testing.T) {
		up, _ := counted(t)
		up.Env = append(up.Env, okFileEnv+"="+filepath.Join(t.TempDir(), "absent")) // the child exits 3
		g := newGateway(t, up, "", local, gateway.WithConnectTimeout(5*time.Second))
		ct, st := mcp.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go gateway.ServeLocal(g, ctx, st)
		_, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(ctx, ct, nil)
		if err == nil || !strings.Contains(err.Error(), "the upstream MCP server did not start: the upstream command exited (exit status 3) before it answered initialize") {
			t.Errorf("initialize: %v", err)
		}
	})
	t.Run("a program that does not exist", func(t *testing.T) {
		m, err := manifest.Parse(manifestFor(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		enf, err := axgate.New(m)
		if err != nil {
			t.Fatal(err)
		}
		defer enf.Close()
		for _, up := range []gateway.Upstream{{Command: "/nonexistent/upstream"}, {Command: "axgate-no-such-upstream-program"}, {Command: t.TempDir()}} {
			if g, err := gateway.New(enf, up, local); err == nil {
				g.Close()
				t.Errorf("%+v: New succeeded", up)
			} else if !strings.Contains(err.Error(), "cannot be started") {
				t.Errorf("%+v: %v", up, err)
			}
		}
	})
}
