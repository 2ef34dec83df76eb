package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPSandboxFlagsChecked: a --sandbox mode mcp does not know, sandbox
// paths without a sandbox and a sandbox for an --upstream-url are usage
// errors.
func TestMCPSandboxFlagsChecked(t *testing.T) {
	t.Parallel()
	m := gatewayManifest
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--sandbox", "yes"}, "--sandbox is on, optional or off"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--sandbox-ro", "/srv"}, "are for --sandbox on or optional"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--sandbox-network"}, "are for --sandbox on or optional"},
		{[]string{"--manifest", m, "--upstream-url", "http://x/mcp", "--anonymous", "--sandbox", "on"}, "an --upstream-url runs no child"},
	} {
		_, stderr, code := cli(t, nil, append([]string{"mcp"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcp %q: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestMCPSandboxOnWithoutBwrap: --sandbox on with no bwrap in PATH fails
// the start, saying so. (Not parallel: it sets PATH.)
func TestMCPSandboxOnWithoutBwrap(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("PATH", t.TempDir())
	_, stderr, code := cli(t, nil, "mcp", "--manifest", gatewayManifest, "--upstream-command", os.Args[0],
		"--anonymous", "--listen", "127.0.0.1:0", "--sandbox", "on")
	if code == exitOK || !strings.Contains(stderr, "bubblewrap (bwrap) is not in PATH") {
		t.Errorf("mcp --sandbox on without bwrap: exit %d, %q; want a failed start that names bwrap", code, stderr)
	}
}

// TestMCPSandboxedServerFilesystem runs axgate mcp --stdio --sandbox on in
// front of server-filesystem with one writable folder and
// --forward-client-roots: the client's root / reaches the server, which
// still reads only the folder.
func TestMCPSandboxedServerFilesystem(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("bubblewrap runs on Linux only")
	}
	if err := exec.Command("bwrap", "--unshare-all", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--", "true").Run(); err != nil {
		if os.Getenv("AXGATE_TEST_SANDBOX") == "required" {
			t.Fatalf("AXGATE_TEST_SANDBOX=required, but bwrap cannot start a sandbox here: %v", err)
		}
		t.Skipf("no sandbox here: bwrap: %v", err)
	}
	root, notes, command := filesystemRoot(t)
	words, err := splitCommand(command)
	if err != nil {
		t.Fatal(err)
	}
	script := words[1]
	modules := script[:strings.Index(script, "/node_modules/")+len("/node_modules")]
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("the content outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "mcp", "--stdio", "--manifest", gatewayManifest, "--upstream-command", command,
		"--local-user", "alice", "--forward-client-roots",
		"--sandbox", "on", "--sandbox-ro", modules, "--sandbox-rw", root)
	cmd.Env = append(os.Environ(), testAs+"=axgate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///"}, &mcp.Root{URI: "file://" + outside})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	defer cs.Close()
	defer func() {
		if t.Failed() {
			t.Logf("axgate mcp --stdio:\n%s", stderr.String())
		}
	}()
	if res := callTool(t, cs, "read_text_file", map[string]any{"path": notes}); res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("read_text_file in the folder: %s", resultText(res))
	}
	var allowed string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		if allowed = resultText(callTool(t, cs, "list_allowed_directories", map[string]any{})); strings.Contains("\n"+allowed+"\n", "\n/\n") {
			break
		}
	}
	if !strings.Contains("\n"+allowed+"\n", "\n/\n") {
		t.Fatalf("server-filesystem did not take the client's root /: %s", allowed)
	}
	if res := callTool(t, cs, "read_text_file", map[string]any{"path": secret}); !res.IsError || strings.Contains(resultText(res), "the content outside") {
		t.Errorf("the sandboxed server read a file outside its folder: %s", resultText(res))
	}
}
