package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readmeCommands returns the lines of the first ```sh block after the
// heading of the repository's README.
func readmeCommands(t *testing.T, heading string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	found, in := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			found = true
		case found && !in && line == "```sh":
			in = true
		case in && line == "```":
			return lines
		case in:
			lines = append(lines, line)
		}
	}
	t.Fatalf("README.md has no ```sh block under %q", heading)
	return nil
}

// TestREADMEGateAnMCPServer runs the three commands of the README's "Gate
// an existing MCP server" exactly as written, with sh, in an empty folder
// holding files/ and with this test binary as axgate in PATH: npm installs
// the server, manifest init drafts axag.json (which passes lint at level
// basic), and the MCP client of a desktop app runs the last command and
// reads a file, is refused an unconfirmed write, and does not see what the
// manifest leaves out.
func TestREADMEGateAnMCPServer(t *testing.T) {
	cmds := readmeCommands(t, "## Gate an existing MCP server")
	if len(cmds) != 3 || !strings.HasPrefix(cmds[0], "npm install ") || !strings.HasPrefix(cmds[1], "axgate manifest init ") || !strings.HasPrefix(cmds[2], "axgate mcp ") {
		t.Fatalf("want npm install, axgate manifest init, axgate mcp; the README says:\n%s", strings.Join(cmds, "\n"))
	}
	if testing.Short() {
		t.Skip("the README's commands install @modelcontextprotocol/server-filesystem with npm: not in -short mode")
	}
	for _, tool := range []string{"sh", "node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the README's commands need it", tool)
		}
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "axgate")); err != nil {
		t.Fatal(err)
	}
	environ := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), testAs+"=axgate")
	sh := func(ctx context.Context, line string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, environ
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if out, err := sh(ctx, cmds[0]).CombinedOutput(); err != nil {
		t.Skipf("%s failed (offline?): %v\n%s", cmds[0], err, out)
	}
	var stderr bytes.Buffer
	init := sh(ctx, cmds[1])
	init.Stderr = &stderr
	if err := init.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", cmds[1], err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "review these") {
		t.Errorf("manifest init listed no guesses:\n%s", stderr.String())
	}
	if out, errOut, code := cli(t, nil, "lint", "--level", "basic", filepath.Join(dir, "axag.json")); code != exitOK {
		t.Fatalf("the drafted axag.json fails lint --level basic:\n%s%s", out, errOut)
	}

	stderr.Reset()
	gw := sh(ctx, cmds[2])
	gw.Stderr = &stderr
	// A client that claims the whole disk as its root: the gateway, as
	// the README runs it, does not pass that on to the server.
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///"})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: gw}, nil)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmds[2], err, stderr.String())
	}
	defer cs.Close()
	names := listed(t, cs)
	for _, want := range []string{"read_text_file", "write_file", "move_file"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s is not listed: %v", want, names)
		}
	}
	hello := filepath.Join(dir, "files", "hello.txt")
	if res := callTool(t, cs, "read_text_file", map[string]any{"path": hello}); res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("read_text_file: %s", resultText(res))
	}
	client.AddRoots(&mcp.Root{URI: "file://" + dir}) // notifications/roots/list_changed
	for range 3 {
		got := resultText(callTool(t, cs, "list_allowed_directories", map[string]any{}))
		if !strings.Contains(got, filepath.Join(dir, "files")) || strings.Contains(got, "\n/\n") || strings.HasSuffix(got, "\n/") || strings.Contains(got, dir+"\n") || strings.HasSuffix(got, dir) {
			t.Fatalf("the client's roots widened the server's folders: %q", got)
		}
	}
	if res := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(dir, "axag.json")}); !res.IsError {
		t.Errorf("a file outside files was read: %.200s", resultText(res))
	}
	// This client cannot ask the person: the write is refused.
	refused(t, callTool(t, cs, "write_file", map[string]any{"path": hello, "content": "bye"}), "AXAG_CONFIRMATION_MISSING", "")
	if got := fileContent(hello); got != "hello\n" {
		t.Errorf("a refused write changed the file: %q", got)
	}
}
