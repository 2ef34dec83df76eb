package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// readmeFolder runs the first two commands of the README's "Gate an
// existing MCP server" exactly as written, with sh, in an empty folder and
// with this test binary as axgate in PATH: the folder files/ is made and the
// server installed, and manifest init drafts axag.json (which passes lint at
// level basic). It returns the folder, the folder holding axgate, the
// environment the commands ran with, and the third command.
func readmeFolder(t *testing.T, ctx context.Context) (dir, bin string, environ []string, gateway string) {
	t.Helper()
	cmds := readmeCommands(t, "## Gate an existing MCP server")
	if len(cmds) != 3 || !strings.HasPrefix(cmds[0], "mkdir -p files && npm install ") || !strings.HasPrefix(cmds[1], "axgate manifest init ") || !strings.HasPrefix(cmds[2], "axgate mcp ") {
		t.Fatalf("want mkdir -p files && npm install, axgate manifest init, axgate mcp; the README says:\n%s", strings.Join(cmds, "\n"))
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
	bin = t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "axgate")); err != nil {
		t.Fatal(err)
	}
	environ = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), testAs+"=axgate")
	sh := func(line string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, environ
		return cmd
	}
	if out, err := sh(cmds[0]).CombinedOutput(); err != nil {
		t.Skipf("%s failed (offline?): %v\n%s", cmds[0], err, out)
	}
	// The folder the first command made is the one the server shares.
	if err := os.WriteFile(filepath.Join(dir, "files", "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	init := sh(cmds[1])
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
	return dir, bin, environ, cmds[2]
}

// checkFilesGateway lists the tools of a gateway in front of the
// filesystem server, reads files/hello.txt through it, and is refused an
// unconfirmed write (this client cannot ask the person).
func checkFilesGateway(t *testing.T, cs *mcp.ClientSession, dir string) {
	t.Helper()
	names := listed(t, cs)
	for _, want := range []string{"read_text_file", "write_file", "move_file"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not listed: %v", want, names)
		}
	}
	hello := filepath.Join(dir, "files", "hello.txt")
	if res := callTool(t, cs, "read_text_file", map[string]any{"path": hello}); res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("read_text_file: %s", resultText(res))
	}
	refused(t, callTool(t, cs, "write_file", map[string]any{"path": hello, "content": "bye"}), "AXAG_CONFIRMATION_MISSING", "")
	if got := fileContent(hello); got != "hello\n" {
		t.Errorf("a refused write changed the file: %q", got)
	}
}

// TestREADMEGateAnMCPServer runs the three commands of the README's "Gate
// an existing MCP server" exactly as written, with sh, in an empty folder:
// the MCP client of a desktop app runs the last command and reads a file,
// is refused an unconfirmed write, and cannot widen the server's folders
// with roots of its own.
func TestREADMEGateAnMCPServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, _, environ, gateway := readmeFolder(t, ctx)

	var stderr bytes.Buffer
	gw := exec.CommandContext(ctx, "sh", "-c", gateway)
	gw.Dir, gw.Env, gw.Stderr = dir, environ, &stderr
	// A client that claims the whole disk as its root: the gateway, as
	// the README runs it, does not pass that on to the server.
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///"})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: gw}, nil)
	if err != nil {
		t.Fatalf("%s: %v\n%s", gateway, err, stderr.String())
	}
	defer cs.Close()
	checkFilesGateway(t, cs, dir)

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
}

// desktopServer is one entry of a desktop client's MCP configuration.
type desktopServer struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// docsJSON returns the json block between <!-- name:start --> and
// <!-- name:end --> of a file of the repository.
func docsJSON(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- "+name+":start -->\n```json\n")
	if !ok {
		t.Fatalf("%s has no <!-- %s:start --> json block", file, name)
	}
	block, _, ok = strings.Cut(block, "```\n<!-- "+name+":end -->")
	if !ok {
		t.Fatalf("%s: <!-- %s:start --> holds more than one json block", file, name)
	}
	return block
}

// TestREADMEDesktopConfigStartsFromAnotherDirectory: the desktop client
// configuration of the README (Claude Desktop's and Cursor's mcpServers
// form), its placeholders replaced by the folder where the three commands
// ran and by the axgate binary, starts the gateway from another working
// directory, as a desktop client does, and an MCP client lists its tools
// and reads a file through it. VS Code's form in docs/mcp-gateway.md starts
// the same command.
func TestREADMEDesktopConfigStartsFromAnotherDirectory(t *testing.T) {
	t.Parallel()
	const folder, binary = "/home/me/gated", "/home/me/go/bin/axgate"
	var desktop struct {
		MCPServers map[string]desktopServer `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(docsJSON(t, "README.md", "desktop-config")), &desktop); err != nil {
		t.Fatalf("the README's desktop configuration: %v", err)
	}
	var vscode struct {
		Servers map[string]desktopServer `json:"servers"`
	}
	if err := json.Unmarshal([]byte(docsJSON(t, filepath.Join("docs", "mcp-gateway.md"), "vscode-config")), &vscode); err != nil {
		t.Fatalf("docs/mcp-gateway.md's VS Code configuration: %v", err)
	}
	srv, ok := desktop.MCPServers["files"]
	if len(desktop.MCPServers) != 1 || !ok {
		t.Fatalf("want one server, files; the README's configuration has %v", desktop.MCPServers)
	}
	if vs := vscode.Servers["files"]; len(vscode.Servers) != 1 || vs.Type != "stdio" || vs.Command != srv.Command || !slices.Equal(vs.Args, srv.Args) {
		t.Errorf("VS Code's configuration is not the README's with type stdio: %+v, want %+v", vscode.Servers, srv)
	}
	if srv.Command != binary {
		t.Errorf("the configuration runs %s; the README says to replace %s", srv.Command, binary)
	}
	for _, a := range srv.Args {
		for _, w := range strings.Fields(a) {
			if (strings.Contains(w, "/") || strings.HasSuffix(w, ".json")) && !filepath.IsAbs(w) {
				t.Errorf("the configuration names a relative path, %q: a desktop client starts it elsewhere", w)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, bin, environ, _ := readmeFolder(t, ctx)
	args := make([]string, len(srv.Args))
	for i, a := range srv.Args {
		args[i] = strings.ReplaceAll(a, folder, dir)
	}
	var stderr bytes.Buffer
	gw := exec.CommandContext(ctx, strings.Replace(srv.Command, binary, filepath.Join(bin, "axgate"), 1), args...)
	gw.Dir, gw.Env, gw.Stderr = t.TempDir(), environ, &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: gw}, nil)
	if err != nil {
		t.Fatalf("the desktop configuration: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	checkFilesGateway(t, cs, dir)
}
