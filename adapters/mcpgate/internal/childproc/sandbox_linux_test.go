package childproc

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testSandbox is a sandbox, or a skip where bubblewrap cannot run (a
// failure with AXGATE_TEST_SANDBOX=required, as in CI).
func testSandbox(t *testing.T, network bool) *Sandbox {
	t.Helper()
	bwrap, err := FindBwrap(network)
	if err != nil {
		if os.Getenv("AXGATE_TEST_SANDBOX") == "required" {
			t.Fatalf("AXGATE_TEST_SANDBOX=required, but: %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
	return &Sandbox{Bwrap: bwrap, Network: network}
}

// probe runs the test binary as probe mode with arg in s, as a Transport
// would start it, and returns what it printed.
func probe(t *testing.T, s *Sandbox, mode, arg string) string {
	t.Helper()
	c := Command{Path: os.Args[0], Env: Env(false, []string{probeEnv + "=" + mode, probeArgEnv + "=" + arg}), Sandbox: s}
	args, err := s.bwrapArgs(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.Bwrap, args...)
	cmd.Env = c.Env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the sandboxed probe failed: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestSandboxWithoutNetworkCannotConnect: without Network the child cannot
// connect to a listener on the host's 127.0.0.1; with it, it can.
func TestSandboxWithoutNetworkCannotConnect(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if got := probe(t, testSandbox(t, false), "connect", ln.Addr().String()); got == "ok" {
		t.Errorf("a child sandboxed without network connected to %s on the host", ln.Addr())
	}
	if got := probe(t, testSandbox(t, true), "connect", ln.Addr().String()); got != "ok" {
		t.Errorf("a child sandboxed with network could not connect to %s: %s", ln.Addr(), got)
	}
}

// TestSandboxShowsOnlyListedPaths: the child reads a listed read-only file
// but cannot write it, writes in a listed writable folder, and sees nothing
// of a folder not listed, nor the gateway's home.
func TestSandboxShowsOnlyListedPaths(t *testing.T) {
	t.Parallel()
	ro, rw, hidden := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{ro, hidden} {
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("content"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := testSandbox(t, false)
	s.ReadOnly, s.Writable = []string{ro}, []string{rw}
	if got := probe(t, s, "read", filepath.Join(ro, "f")); got != "ok" {
		t.Errorf("reading a listed read-only file: %s", got)
	}
	if got := probe(t, s, "write", filepath.Join(ro, "f")); got == "ok" {
		t.Error("the child wrote a file listed read-only")
	}
	if got := probe(t, s, "write", filepath.Join(rw, "new")); got != "ok" {
		t.Errorf("writing in a listed writable folder: %s", got)
	}
	if data, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(data) != "written" {
		t.Errorf("the child's write in the writable folder is not on the host: %q %v", data, err)
	}
	if got := probe(t, s, "read", filepath.Join(hidden, "f")); got == "ok" || !strings.Contains(got, "no such file") {
		t.Errorf("reading a file in a folder not listed: %q, want no such file", got)
	}
	if data, err := os.ReadFile(filepath.Join(ro, "f")); err != nil || string(data) != "content" {
		t.Errorf("the read-only file changed: %q %v", data, err)
	}
}

// TestSandboxRunsAProgramFoundThroughALink: a program found in PATH under
// /bin, a link to usr/bin on a merged /usr, runs.
func TestSandboxRunsAProgramFoundThroughALink(t *testing.T) {
	t.Parallel()
	fi, err := os.Lstat("/bin")
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Skip("/bin is no link here")
	}
	s := testSandbox(t, false)
	c := Command{Path: "/bin/sh", Args: []string{"-c", "echo ran"}, Env: []string{"PATH=/bin"}, Sandbox: s}
	args, err := s.bwrapArgs(c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(s.Bwrap, args...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ran" {
		t.Errorf("/bin/sh in the sandbox: %v %s (args %q)", err, out, args)
	}
}
