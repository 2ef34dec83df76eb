//go:build linux

package gateway_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requireSandbox skips a test where bubblewrap cannot run, unless
// AXGATE_TEST_SANDBOX=required (CI), where it fails.
func requireSandbox(t *testing.T) {
	t.Helper()
	if _, err := childproc.FindBwrap(false); err != nil {
		if os.Getenv("AXGATE_TEST_SANDBOX") == "required" {
			t.Fatalf("AXGATE_TEST_SANDBOX=required, but: %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
}

// marked lists the running processes whose environment holds mark (host
// pids), whatever their PID namespace.
func marked(mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, []byte(mark)) {
			continue
		}
		if running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// newMark is an environment variable that marks a test's processes, and
// kills those left at the test's end.
func newMark(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	mark := "AXGATE_SANDBOX_TEST_MARK=" + hex.EncodeToString(b)
	t.Cleanup(func() {
		for range 5 {
			for _, pid := range marked(mark) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return mark
}

// TestSandboxStopEndsForkingHelpers: under the sandbox, the stop of a child
// ends the helpers it started that keep forking a successor and exiting
// (the known limit of an unsandboxed child, TestStopKillsHoppingHelper):
// once New has stopped its pin-checking child, no process of it runs.
func TestSandboxStopEndsForkingHelpers(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	mark := newMark(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := helperEnv + `=hop "$TEST_BIN" </dev/null >/dev/null 2>&1 &
` + helperEnv + `=hop "$TEST_BIN" </dev/null >/dev/null 2>&1 &
while [ ! -s "$PID_FILE" ]; do sleep 0.01; done
sleep 0.2
exec "$TEST_BIN"`
	// The pids the helpers write are of the sandbox's PID namespace: the
	// test finds their processes by mark, never by those pids.
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", pidsEnv + "=" + pids, "PID_FILE=" + pids, "TEST_BIN=" + os.Args[0], mark}}
	g, err := newGatewayErr(t, up, gateway.WithSandbox(gateway.Sandbox{Mode: "on", ReadOnly: []string{os.Args[0]}, Writable: []string{dir}}))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := len(strings.Fields(readFile(pids))); n == 0 {
		t.Fatal("the pin-checking child started no helper")
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v of the sandboxed child still run after New stopped it", left)
		for _, pid := range left {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Logf("%d: %s %s %q", pid, stat, ns, cmd)
		}
		self, _ := os.Readlink("/proc/self/ns/pid")
		t.Logf("self %s", self)
	}
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

// TestSandboxedFilesystemCannotReadOutside: server-filesystem sandboxed
// with one writable folder, behind a gateway that forwards the client's
// roots: the client widens the server's roots to /, and the server, which
// then lists / as allowed, still cannot read a file outside the folder.
func TestSandboxedFilesystemCannotReadOutside(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	_, dir := installExample(t)
	shared, outside, sharedFile, outsideFile := folders(t)
	g := fsGateway(t, shared, io.Discard, gateway.ForwardClientRoots(),
		gateway.WithSandbox(gateway.Sandbox{Mode: "on", ReadOnly: []string{filepath.Join(dir, "node_modules")}, Writable: []string{shared}}))
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///"}, &mcp.Root{URI: "file://" + outside})
	carol := connectFront(t, g, "http", client, "carol-token")
	if res := call(t, carol, "read_text_file", map[string]any{"path": sharedFile}); res.IsError || !strings.Contains(text(res), "shared content") {
		t.Fatalf("read in the shared folder: %s", text(res))
	}
	// The widening happens: the server takes the client's roots.
	widened := eventually(20*time.Second, func() bool {
		res := call(t, carol, "list_allowed_directories", map[string]any{})
		return !res.IsError && strings.Contains("\n"+text(res)+"\n", "\n/\n")
	})
	if !widened {
		t.Fatalf("server-filesystem did not take the client's root /: %s", text(call(t, carol, "list_allowed_directories", map[string]any{})))
	}
	res := call(t, carol, "read_text_file", map[string]any{"path": outsideFile})
	if !res.IsError || strings.Contains(text(res), "the content outside") {
		t.Fatalf("the sandboxed server read a file outside its folder: %s", text(res))
	}
	if res := call(t, carol, "read_text_file", map[string]any{"path": "/etc/shadow"}); !res.IsError {
		t.Errorf("the sandboxed server read /etc/shadow: %s", text(res))
	}
}

// TestSandboxedSessionChild: a stdio gateway's session child runs in a PID
// namespace of its own and serves calls; once Close returns, no process of
// it runs.
func TestSandboxedSessionChild(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	mark := newMark(t)
	up := stdioUpstream()
	up.Env = append(up.Env, mark)
	g, err := newGatewayErr(t, up, gateway.WithLocalPrincipal(principals["alice-token"]),
		gateway.WithSandbox(gateway.Sandbox{Mode: "on", ReadOnly: []string{os.Args[0]}}))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := localSession(t, g, nil)
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("a call through the sandboxed child: %s", text(res))
	}
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	procs := marked(mark)
	if len(procs) < 2 {
		t.Fatalf("processes %v carry the child's environment: want bubblewrap and the child at least", procs)
	}
	for _, pid := range procs {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); filepath.Base(exe) == "bwrap" {
			continue // bubblewrap itself runs beside the gateway
		}
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err == nil && ns == self {
			t.Errorf("process %d of the sandboxed child runs in the gateway's PID namespace", pid)
		}
	}
	g.Close()
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v of the sandboxed child still run after Close", left)
	}
}

// TestSandboxStopOfAStubbornChild: a sandboxed child that outlives its
// standard input and ignores SIGTERM is ended by the stop's SIGKILL (of the
// sandbox's init), it and what it started.
func TestSandboxStopOfAStubbornChild(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	mark := newMark(t)
	script := `trap "" TERM
sleep 300 </dev/null >/dev/null 2>&1 &
"$TEST_BIN"
exec sleep 300 </dev/null >/dev/null 2>&1`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", "TEST_BIN=" + os.Args[0], mark}}
	g, err := newGatewayErr(t, up, gateway.WithSandbox(gateway.Sandbox{Mode: "on", ReadOnly: []string{os.Args[0]}}), gateway.WithChildGrace(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v of the stubborn sandboxed child still run after New stopped it", left)
	}
}
