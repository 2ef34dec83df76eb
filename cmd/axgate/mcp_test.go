package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/mcptest"
	"github.com/axgate/axgate/middleware"
)

// testAs makes the test binary play another program, for the tests that
// need a process of their own: "axgate" (the command, for --stdio) or
// "env-upstream" (an MCP server on stdio that tells its environment).
const testAs = "AXGATE_TEST_AS"

func TestMain(m *testing.M) {
	switch os.Getenv(testAs) {
	case "axgate":
		main()
	case "env-upstream":
		os.Exit(serveEnvUpstream())
	case "failing-upstream":
		// As server-filesystem does when the folder it serves is missing.
		fmt.Fprintln(os.Stderr, "Error: None of the specified directories are accessible")
		os.Exit(3)
	}
	// The tests wait on servers, clients and child processes far more than
	// they compute: unless -parallel says otherwise, run more of them at
	// once than there are CPUs.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}

// serveEnvUpstream is an MCP server on stdio with one tool, "env", that
// answers the process's environment; it writes its pid to $PIDFILE.
func serveEnvUpstream() int {
	if f := os.Getenv("PIDFILE"); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return 1
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "env-upstream", Version: "v1"}, nil)
	type out struct {
		Env []string `json:"env"`
	}
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The upstream's environment.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, out, error) {
			return nil, out{Env: os.Environ()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "Answers once $RELEASE exists.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, out, error) {
			if err := os.WriteFile(os.Getenv("HELD"), nil, 0o600); err != nil {
				return nil, out{}, err
			}
			for {
				if _, err := os.Stat(os.Getenv("RELEASE")); err == nil {
					return nil, out{Env: []string{"released"}}, nil
				}
				select {
				case <-ctx.Done():
					return nil, out{}, ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// gatewayManifest is the manifest of examples/mcpgateway, for
// server-filesystem: reads for anyone, writes for editors with
// confirmation, moves also approved by an admin.
var gatewayManifest = filepath.Join("..", "..", "examples", "mcpgateway", "axag.json")

// filesystemRoot is a folder with notes.txt ("hello\n") that
// server-filesystem may touch, and the command line that serves it.
func filesystemRoot(t *testing.T) (root, notes, command string) {
	t.Helper()
	if testing.Short() {
		t.Skip("the end-to-end tests against @modelcontextprotocol/server-filesystem install it with npm: not in -short mode")
	}
	node, script := mcptest.InstallServerFilesystem(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	notes = filepath.Join(root, "notes.txt")
	if err := os.WriteFile(notes, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, notes, strconv.Quote(node) + " " + strconv.Quote(script) + " " + strconv.Quote(root)
}

// childEnviron is the environment the commands see: PATH and HOME, which a
// child upstream gets, and a secret, which it must not.
func childEnviron() map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "AXGATE_TEST_SECRET": "s3cr3t"}
}

// runningMCP is axgate mcp run in-process by run, with a real listener.
type runningMCP struct {
	url, human string // http://…/mcp, and the --human base URL
	log        *lineWatcher
	stop       func() int // cancels the context and returns the exit status
}

// startMCP runs "axgate mcp ARGS --listen 127.0.0.1:0" in-process and
// waits until it listens.
func startMCP(t *testing.T, environ map[string]string, args ...string) *runningMCP {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{stdout: io.Discard, stderr: pw, getenv: func(k string) string { return environ[k] }}
	done := make(chan int, 1)
	go func() {
		code := run(ctx, e, append([]string{"mcp", "--listen", "127.0.0.1:0"}, args...))
		pw.Close()
		done <- code
	}()
	r := &runningMCP{log: newLineWatcher(pr)}
	var once sync.Once
	code := 0
	r.stop = func() int {
		once.Do(func() {
			cancel()
			code = <-done
		})
		return code
	}
	t.Cleanup(func() { r.stop() })
	if slices.Contains(args, "--human") {
		line := r.log.waitFor(t, "confirm and approve at")
		r.human = regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)[1]
	}
	line := r.log.waitFor(t, "axgate mcp: listening")
	r.url = regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)[1]
	return r
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// agent connects the Go SDK's client to url as the bearer of token.
func agent(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args any, creds ...middleware.Credentials) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if len(creds) > 0 {
		p.Meta = mcpgate.CredentialsMeta(creds[0])
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// refused checks that res is a refusal with code (and reason, unless "")
// and returns its details.
func refused(t *testing.T, res *mcp.CallToolResult, code, reason string) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want %s, got a result: %s", code, resultText(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code != code {
		t.Fatalf("want %s, got %s", code, raw)
	}
	if reason != "" && env.Error.Details["reason"] != reason {
		t.Fatalf("%s with reason %v, want %s", code, env.Error.Details["reason"], reason)
	}
	return env.Error.Details
}

func acceptAll(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept"}, nil
}

func declineAll(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

func fileContent(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(data)
}

var (
	fsReads  = []string{"directory_tree", "get_file_info", "list_allowed_directories", "list_directory", "read_multiple_files", "read_text_file", "search_files"}
	fsWrites = []string{"create_directory", "directory_tree", "edit_file", "get_file_info", "list_allowed_directories", "list_directory", "move_file", "read_multiple_files", "read_text_file", "search_files", "write_file"}
)

// TestMCPServerFilesystemHTTP runs axgate mcp in-process in front of a real
// third-party MCP server, @modelcontextprotocol/server-filesystem (a child
// per session), with examples/mcpgateway/axag.json and bearer JWTs from
// axgate keys gen and axgate token, and drives it with the Go SDK's client:
// the list of each caller, a read, refused writes, a write the person
// confirms by elicitation (written) and one they decline (not), a move an
// admin approves on the --human endpoint, a hidden tool; then a graceful
// shutdown.
func TestMCPServerFilesystemHTTP(t *testing.T) {
	t.Parallel()
	root, notes, command := filesystemRoot(t)
	pki := newServePKI(t)
	gw := startMCP(t, childEnviron(), "--manifest", gatewayManifest, "--upstream-command", command,
		"--jwks", pki.jwks, "--human", "127.0.0.1:0", "--human-audience", "axgate-people", "--trust-client-elicitation")
	// The audience is the resource URL by default; --human takes tokens of
	// the people's audience.
	mintFor := func(aud, sub string, roles ...string) string {
		args := []string{"principal", "--key", pki.key, "--sub", sub, "--aud", aud}
		if len(roles) > 0 {
			args = append(args, "--roles", strings.Join(roles, ","))
		}
		return mint(t, args...)
	}
	bearer := func(sub string, roles ...string) string { return mintFor(gw.url, sub, roles...) }
	person := func(sub string, roles ...string) string { return mintFor("axgate-people", sub, roles...) }
	carolToken, aliceToken := bearer("carol"), bearer("alice", "editor")

	t.Run("authorization", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, gw.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		meta := strings.TrimSuffix(gw.url, "/mcp") + "/.well-known/oauth-protected-resource"
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+meta) {
			t.Fatalf("without a token: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		code, body := get(t, meta)
		if code != http.StatusOK || body["resource"] != gw.url {
			t.Fatalf("metadata: %d %v", code, body)
		}
		// A token for another audience is refused.
		other := mint(t, "principal", "--key", pki.key, "--sub", "carol", "--aud", "https://elsewhere.example.com/mcp")
		_, err = mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: gw.url, HTTPClient: &http.Client{Transport: bearerTransport{other}}}, nil)
		if err == nil {
			t.Fatal("a token for another audience connected")
		}
	})

	carol := agent(t, gw.url, carolToken, nil)
	alice := agent(t, gw.url, aliceToken, nil)
	if got := listed(t, carol); !slices.Equal(got, fsReads) {
		t.Errorf("carol lists %v, want %v", got, fsReads)
	}
	if got := listed(t, alice); !slices.Equal(got, fsWrites) {
		t.Errorf("alice lists %v, want %v", got, fsWrites)
	}

	// A read.
	if res := callTool(t, carol, "read_text_file", map[string]any{"path": notes}); res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("read_text_file: %s", resultText(res))
	}
	// Refused writes: no role, then no confirmation (the client cannot ask).
	refused(t, callTool(t, carol, "write_file", map[string]any{"path": notes, "content": "carol"}), "AXAG_ROLE_INSUFFICIENT", "")
	refused(t, callTool(t, alice, "write_file", map[string]any{"path": notes, "content": "unconfirmed"}), "AXAG_CONFIRMATION_MISSING", "")
	if got := fileContent(notes); got != "hello\n" {
		t.Fatalf("a refused write changed the file: %q", got)
	}
	// Confirmed by elicitation, and declined.
	yes := agent(t, gw.url, aliceToken, &mcp.ClientOptions{ElicitationHandler: acceptAll})
	if res := callTool(t, yes, "write_file", map[string]any{"path": notes, "content": "confirmed"}); res.IsError {
		t.Fatalf("confirmed write: %s", resultText(res))
	}
	if got := fileContent(notes); got != "confirmed" {
		t.Fatalf("after a confirmed write the file holds %q", got)
	}
	no := agent(t, gw.url, aliceToken, &mcp.ClientOptions{ElicitationHandler: declineAll})
	refused(t, callTool(t, no, "write_file", map[string]any{"path": notes, "content": "declined"}), "AXAG_CONFIRMATION_MISSING", "declined")
	if got := fileContent(notes); got != "confirmed" {
		t.Fatalf("a declined write changed the file: %q", got)
	}

	// A move: confirmed, then approved by bob on the --human endpoint.
	moved := filepath.Join(root, "moved.txt")
	move := map[string]any{"source": notes, "destination": moved}
	details := refused(t, callTool(t, yes, "move_file", move), "AXAG_APPROVAL_MISSING", "")
	id, _ := details["approval_request_id"].(string)
	if id == "" {
		t.Fatalf("no approval request in %v", details)
	}
	if code, body := post(t, gw.human, "/approvals/"+id, person("alice", "editor"), `{"approve":true}`); code == http.StatusOK {
		t.Fatalf("alice (no admin) approved: %v", body)
	}
	code, body := post(t, gw.human, "/approvals/"+id, person("bob", "editor", "admin"), `{"approve":true,"reason":"fine"}`)
	approval, _ := body["token"].(string)
	if code != http.StatusOK || approval == "" {
		t.Fatalf("bob's approval: %d %v", code, body)
	}
	if _, err := os.Stat(moved); err == nil {
		t.Fatal("the file moved before the approved call")
	}
	if res := callTool(t, yes, "move_file", move, middleware.Credentials{Approvals: []string{approval}}); res.IsError {
		t.Fatalf("approved move: %s", resultText(res))
	}
	if got := fileContent(moved); got != "confirmed" {
		t.Fatalf("after the approved move %s holds %q", moved, got)
	}

	// Tools of the server the manifest does not declare.
	refused(t, callTool(t, carol, "read_file", map[string]any{"path": moved}), "AXAG_INTENT_NOT_FOUND", "")
	refused(t, callTool(t, alice, "list_directory_with_sizes", map[string]any{"path": root}), "AXAG_INTENT_NOT_FOUND", "")

	if code := gw.stop(); code != exitOK {
		t.Fatalf("axgate mcp exited %d:\n%s", code, gw.log.all())
	}
	gw.log.waitFor(t, "axgate mcp: stopped")
}

// TestMCPServerFilesystemStdio runs axgate mcp --stdio (the test binary as
// the command, as a desktop client starts it) in front of
// server-filesystem, for the local user alice, an editor, and drives it
// with the Go SDK's client over the process's standard input and output.
func TestMCPServerFilesystemStdio(t *testing.T) {
	t.Parallel()
	_, notes, command := filesystemRoot(t)
	stderrOf := map[*mcp.ClientSession]*bytes.Buffer{}
	run := func(t *testing.T, opts *mcp.ClientOptions, roles string, flags ...string) *mcp.ClientSession {
		t.Helper()
		cmd := exec.Command(os.Args[0], append([]string{"mcp", "--stdio", "--manifest", gatewayManifest, "--upstream-command", command,
			"--local-user", "alice", "--local-roles", roles}, flags...)...)
		cmd.Env = append(os.Environ(), testAs+"=axgate")
		stderr := &bytes.Buffer{}
		cmd.Stderr = stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, opts).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		t.Cleanup(func() {
			cs.Close()
			if t.Failed() {
				t.Logf("axgate mcp --stdio:\n%s", stderr.String())
			}
		})
		stderrOf[cs] = stderr
		return cs
	}
	reader := run(t, nil, "")
	if got := listed(t, reader); !slices.Equal(got, fsReads) {
		t.Errorf("alice without roles lists %v, want %v", got, fsReads)
	}
	plain := run(t, nil, "editor")
	if got := listed(t, plain); !slices.Equal(got, fsWrites) {
		t.Errorf("alice the editor lists %v, want %v", got, fsWrites)
	}
	if res := callTool(t, plain, "read_text_file", map[string]any{"path": notes}); res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("read_text_file: %s", resultText(res))
	}
	refused(t, callTool(t, plain, "write_file", map[string]any{"path": notes, "content": "unconfirmed"}), "AXAG_CONFIRMATION_MISSING", "")
	// By default the client's answer is not the person's: not asked.
	robot := run(t, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		t.Error("the client was asked to confirm without --trust-client-elicitation")
		return &mcp.ElicitResult{Action: "accept"}, nil
	}}, "editor")
	refused(t, callTool(t, robot, "write_file", map[string]any{"path": notes, "content": "robot"}), "AXAG_CONFIRMATION_MISSING", "")
	// The desktop is the person's own app: --trust-client-elicitation.
	no := run(t, &mcp.ClientOptions{ElicitationHandler: declineAll}, "editor", "--trust-client-elicitation")
	refused(t, callTool(t, no, "write_file", map[string]any{"path": notes, "content": "declined"}), "AXAG_CONFIRMATION_MISSING", "declined")
	if got := fileContent(notes); got != "hello\n" {
		t.Fatalf("a refused write changed the file: %q", got)
	}
	yes := run(t, &mcp.ClientOptions{ElicitationHandler: acceptAll}, "editor", "--trust-client-elicitation")
	if res := callTool(t, yes, "write_file", map[string]any{"path": notes, "content": "confirmed"}); res.IsError {
		t.Fatalf("confirmed write: %s", resultText(res))
	}
	if got := fileContent(notes); got != "confirmed" {
		t.Fatalf("after a confirmed write the file holds %q", got)
	}
	refused(t, callTool(t, plain, "read_media_file", map[string]any{"path": notes}), "AXAG_INTENT_NOT_FOUND", "")
	// The warning of --trust-client-elicitation is for HTTP: a stdio
	// client is the person's own app. Read once the process ended.
	yes.Close()
	if log := stderrOf[yes].String(); strings.Contains(log, "trust-client-elicitation") || !strings.Contains(log, "serving on stdio") {
		t.Errorf("axgate mcp --stdio --trust-client-elicitation logged:\n%s", log)
	}
}

// TestMCPStdioConfirmationWithoutElicitation: a stdio client that cannot
// ask the person is refused a write with the command that mints the token
// it needs (axgate mcp --signing-key), and the call made again with the
// token that command prints in _meta["axag/confirmation"] runs. Without
// --signing-key the refusal says that no token made outside is accepted,
// and how to start the gateway so that one is.
func TestMCPStdioConfirmationWithoutElicitation(t *testing.T) {
	t.Parallel()
	_, notes, command := filesystemRoot(t)
	pki := newServePKI(t)
	run := func(t *testing.T, extra ...string) *mcp.ClientSession {
		t.Helper()
		args := append([]string{"mcp", "--stdio", "--manifest", gatewayManifest, "--upstream-command", command,
			"--local-user", "alice", "--local-roles", "editor"}, extra...)
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), testAs+"=axgate")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	write := map[string]any{"path": notes, "content": "confirmed elsewhere"}

	cs := run(t, "--signing-key", pki.key)
	d := refused(t, callTool(t, cs, "write_file", write), "AXAG_CONFIRMATION_MISSING", "")
	how, _ := d["how_to_confirm"].(string)
	_, line, ok := strings.Cut(how, "`")
	line, _, ok2 := strings.Cut(line, "`")
	if !ok || !ok2 || !strings.HasPrefix(line, "axgate token confirmation --key SIGNING_KEY --sub alice ") || !strings.Contains(d["suggestion"].(string), how) {
		t.Fatalf("how_to_confirm names no command: %q (suggestion %q)", how, d["suggestion"])
	}
	words, err := splitCommand(strings.Replace(line, "SIGNING_KEY", strconv.Quote(pki.key), 1))
	if err != nil {
		t.Fatalf("the command %q: %v", line, err)
	}
	tok := mint(t, words[2:]...)
	if res := callTool(t, cs, "write_file", write, middleware.Credentials{Confirmation: tok}); res.IsError {
		t.Fatalf("the write with the token the command minted: %s", resultText(res))
	}
	if got := fileContent(notes); got != "confirmed elsewhere" {
		t.Fatalf("the file holds %q", got)
	}

	bare := run(t)
	d = refused(t, callTool(t, bare, "write_file", write), "AXAG_CONFIRMATION_MISSING", "")
	if how, _ := d["how_to_confirm"].(string); !strings.Contains(how, "without --signing-key") || !strings.Contains(how, "axgate token confirmation --key KEY") {
		t.Errorf("without --signing-key: how_to_confirm %q", how)
	}
}

// TestMCPHTTPConfirmationWithJWKS: over HTTP with only --jwks (keys from
// axgate keys gen), a client that cannot ask the person is refused a write
// with a command that mints a token the gateway accepts: it names the
// audience the gateway checks (its resource URL, not the default "axgate"
// the command would otherwise sign for), and the call made again with the
// token it prints runs.
func TestMCPHTTPConfirmationWithJWKS(t *testing.T) {
	t.Parallel()
	_, notes, command := filesystemRoot(t)
	pki := newServePKI(t)
	gw := startMCP(t, childEnviron(), "--manifest", gatewayManifest, "--upstream-command", command, "--jwks", pki.jwks)
	cs := agent(t, gw.url, mint(t, "principal", "--key", pki.key, "--sub", "alice", "--roles", "editor", "--aud", gw.url), nil)
	write := map[string]any{"path": notes, "content": "confirmed by the key holder"}

	d := refused(t, callTool(t, cs, "write_file", write), "AXAG_CONFIRMATION_MISSING", "")
	how, _ := d["how_to_confirm"].(string)
	_, line, ok := strings.Cut(how, "`")
	line, _, ok2 := strings.Cut(line, "`")
	if !ok || !ok2 || !strings.HasPrefix(line, "axgate token confirmation --key PRIVATE_KEY --sub alice ") || !strings.Contains(line, "--aud "+gw.url) {
		t.Fatalf("how_to_confirm names no command with the gateway's audience %s: %q", gw.url, how)
	}
	words, err := splitCommand(strings.Replace(line, "PRIVATE_KEY", strconv.Quote(pki.key), 1))
	if err != nil {
		t.Fatalf("the command %q: %v", line, err)
	}
	// A token of axgate token's default audience is refused with the one
	// expected.
	defaultAud := slices.DeleteFunc(slices.Clone(words[2:]), func(w string) bool { return w == "--aud" || w == gw.url })
	d = refused(t, callTool(t, cs, "write_file", write, middleware.Credentials{Confirmation: mint(t, defaultAud...)}), "AXAG_CONFIRMATION_MISSING", "wrong_audience")
	if d["expected_audience"] != gw.url {
		t.Errorf("a token of the default audience: expected_audience %v, want %s", d["expected_audience"], gw.url)
	}
	tok := mint(t, words[2:]...)
	if res := callTool(t, cs, "write_file", write, middleware.Credentials{Confirmation: tok}); res.IsError {
		t.Fatalf("the write with the token the command minted: %s", resultText(res))
	}
	if got := fileContent(notes); got != "confirmed by the key holder" {
		t.Fatalf("the file holds %q", got)
	}
}

// TestMCPChildEnvironment checks what a command upstream inherits: PATH,
// HOME and the --upstream-env pairs, never the gateway's other variables
// (its secrets); and that shutdown stops the child.
func TestMCPChildEnvironment(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("AXGATE_TEST_SECRET", "s3cr3t") // in the process's own environment too
	pidFile := filepath.Join(t.TempDir(), "pid")
	manifestPath := filepath.Join("testdata", "mcp", "env.axag.json")
	gw := startMCP(t, childEnviron(), "--manifest", manifestPath, "--anonymous",
		"--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=env-upstream",
		"--upstream-env", "PIDFILE="+pidFile, "--upstream-env", "GREETING=hello world")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: gw.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "env", map[string]any{})
	if res.IsError {
		t.Fatalf("env: %s", resultText(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct{ Env []string }
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out.Env)
	want := []string{"GREETING=hello world", "HOME=" + os.Getenv("HOME"), "PATH=" + os.Getenv("PATH"), "PIDFILE=" + pidFile, testAs + "=env-upstream"}
	slices.Sort(want)
	if !slices.Equal(out.Env, want) {
		t.Errorf("the child's environment is %q, want %q", out.Env, want)
	}

	// The child of this session runs until the gateway stops.
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child %d is not running: %v", pid, err)
	}
	if code := gw.stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, gw.log.all())
	}
	// The gateway waited for its children: the process is gone (reaped).
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child %d still exists after the gateway stopped (%v)", pid, err)
	}
}

// TestMCPShutdown stops axgate mcp while a client is connected (its
// session's GET stream open) and a call is in flight: the call finishes
// with its answer, then the gateway stops, without waiting for the
// shutdown timeout (an hour here: the test would time out).
func TestMCPShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held, release := filepath.Join(dir, "held"), filepath.Join(dir, "release")
	gw := startMCP(t, childEnviron(), "--manifest", filepath.Join("testdata", "mcp", "env.axag.json"), "--anonymous",
		"--shutdown-timeout", "1h", "--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=env-upstream",
		"--upstream-env", "HELD="+held, "--upstream-env", "RELEASE="+release)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: gw.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}})
		answered <- answer{res, err}
	}()
	waitForFile(t, held)
	stopped := make(chan int, 1)
	go func() { stopped <- gw.stop() }()
	gw.log.waitFor(t, "axgate mcp: shutting down")
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.err != nil || a.res.IsError {
		t.Fatalf("the call in flight during shutdown: %v %+v", a.err, a.res)
	}
	if code := <-stopped; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, gw.log.all())
	}
}

// waitForFile polls until path exists; the deadline only bounds a hung
// process.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMCPUsage(t *testing.T) {
	t.Parallel()
	m := gatewayManifest
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream-url", "http://127.0.0.1:1/mcp", "--anonymous"}, "--manifest is required"},
		{[]string{"--manifest", m, "--anonymous"}, "give the upstream"},
		{[]string{"--manifest", m, "--upstream-url", "http://x/mcp", "--upstream-command", "node s.js", "--anonymous"}, "not both"},
		{[]string{"--manifest", m, "--upstream-url", "ftp://x/mcp", "--anonymous"}, "http or https URL"},
		{[]string{"--manifest", m, "--upstream-url", "http://x/mcp"}, "callers must be authenticated"},
		{[]string{"--manifest", m, "--upstream-url", "http://x/mcp", "--upstream-env", "A=b", "--anonymous"}, "--upstream-env is for --upstream-command"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js; rm -rf /", "--anonymous"}, "shell operator"},
		{[]string{"--manifest", m, "--upstream-command", "node 's.js", "--anonymous"}, "--upstream-command"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--upstream-env", "NOEQUALS", "--anonymous"}, "NAME=VALUE"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--stdio"}, "give --local-user"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--stdio", "--local-user", "a", "--listen", ":1"}, "--stdio listens nowhere"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--local-user", "a"}, "are for --stdio"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--human", ":0"}, "--human needs --jwks"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--jwks", "j.json", "--human", ":0"}, "--human needs --human-audience"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--jwks", "j.json", "--human-audience", "people"}, "give --human too"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--jwks", "j.json", "--human", ":0", "--human-audience", "a", "--audience", "a"}, "are both \"a\""},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--jwks", "j.json", "--human", ":0", "--human-audience", "https://gw.example/mcp", "--resource-url", "https://gw.example/mcp"}, "are both"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--stdio", "--local-user", "a", "--jwks", "j.json", "--human", ":0", "--human-audience", "axgate"}, "are both"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--resource-url", "gw/mcp"}, "--resource-url must be"},
		{[]string{"--manifest", m, "--upstream-command", "node s.js", "--anonymous", "--root", "/srv", "--forward-client-roots"}, "contradict"},
	} {
		_, stderr, code := cli(t, nil, append([]string{"mcp"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcp %q: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestMCPRoots: --root DIR is made absolute and given to the upstream as
// a file:// URI; a --root that is not a directory fails the start.
func TestMCPRoots(t *testing.T) {
	// Not parallel: t.Chdir.
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("shared folder", 0o700); err != nil {
		t.Fatal(err)
	}
	var f rootFlags
	if err := f.Set("shared folder"); err != nil {
		t.Fatal(err)
	}
	roots, err := f.mcpRoots()
	if err != nil {
		t.Fatal(err)
	}
	want := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, "shared folder"))}).String()
	if len(roots) != 1 || roots[0].URI != want || !strings.HasPrefix(want, "file:///") || !strings.Contains(want, "shared%20folder") {
		t.Errorf("--root \"shared folder\" is %+v, want %s", roots, want)
	}
	f = nil
	f.Set("missing")
	if _, err := f.mcpRoots(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a --root that is not there: %v", err)
	}
	if err := f.Set(""); err == nil {
		t.Error("--root \"\" was accepted")
	}
}

// TestMCPConfigLists: a configuration file gives the repeatable flags of
// mcp (--root, --upstream-env) as lists, as the README says.
func TestMCPConfigLists(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "manifest: "+gatewayManifest+"\nupstream-command: node s.js\nupstream-env:\n  - A=b\n  - C=d\nroot:\n  - /srv/a\n  - /srv/b\n")
	if out, stderr, code := cli(t, nil, "config", "check", path, "--command", "mcp"); code != exitOK {
		t.Errorf("config check: exit %d\n%s%s", code, out, stderr)
	}
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`node server.js /srv/files`, []string{"node", "server.js", "/srv/files"}},
		{`"/opt/my server/bin" --root '/srv/a b' c\ d`, []string{"/opt/my server/bin", "--root", "/srv/a b", "c d"}},
		// Nothing is expanded: no shell runs the command.
		{`ls * ~ 'price$'`, []string{"ls", "*", "~", "price$"}},
	} {
		got, err := splitCommand(tc.line)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	for _, line := range []string{"", "  ", "a | b", "a && b", "a > f", "a `b`", "a $(b)", "a $HOME", `a "${X}"`} {
		if got, err := splitCommand(line); err == nil {
			t.Errorf("splitCommand(%q) = %q, want an error", line, got)
		}
	}
}

// TestManifestInitServerFilesystem drafts the manifest of
// @modelcontextprotocol/server-filesystem with axgate manifest init and
// compares standard output and the guesses on standard error with golden
// files; the draft passes axgate lint --level basic.
func TestManifestInitServerFilesystem(t *testing.T) {
	t.Parallel()
	_, _, command := filesystemRoot(t)
	environ := childEnviron()
	environ["SOURCE_DATE_EPOCH"] = "1774087200" // 2026-03-21T10:00:00Z
	stdout, stderr, code := cli(t, environ, "manifest", "init", "--upstream-command", command)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "manifest-init-server-filesystem.json", stdout)
	// The child's own lines on standard error come first.
	_, guesses, ok := strings.Cut(stderr, "axgate manifest init:")
	if !ok {
		t.Fatalf("no summary on standard error:\n%s", stderr)
	}
	golden(t, "manifest-init-server-filesystem.guesses.txt", "axgate manifest init:"+guesses)

	path := filepath.Join(t.TempDir(), "axag.json")
	if err := os.WriteFile(path, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, nil, "lint", "--level", "basic", path); code != exitOK {
		t.Fatalf("lint --level basic: exit %d\n%s%s", code, out, errOut)
	}
}

// TestManifestInitHTTP drafts from a streamable HTTP upstream: the source
// names its URL.
func TestManifestInitHTTP(t *testing.T) {
	t.Parallel()
	gw := startMCP(t, childEnviron(), "--manifest", filepath.Join("testdata", "mcp", "env.axag.json"), "--anonymous",
		"--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=env-upstream")
	stdout, stderr, code := cli(t, nil, "manifest", "init", "--upstream-url", gw.url, "--entity", "shell")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Source   map[string]string `json:"source"`
		Entities []struct {
			Name    string `json:"name"`
			Actions []struct {
				Intent string `json:"intent"`
			} `json:"actions"`
		} `json:"entities"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Source["url"] != gw.url || doc.Source["tool"] != "axgate manifest init" {
		t.Errorf("source %v", doc.Source)
	}
	if len(doc.Entities) != 1 || doc.Entities[0].Name != "shell" || len(doc.Entities[0].Actions) != 2 || doc.Entities[0].Actions[0].Intent != "shell.env" {
		t.Errorf("draft:\n%s", stdout)
	}
	if !strings.Contains(stderr, "2 tools drafted") {
		t.Errorf("stderr: %s", stderr)
	}
}

// TestManifestInitUpstreamThatDoesNotStart: an upstream that exits before
// it answers fails the command with exit status 1, its own standard error
// shown and its exit status named, and --out is left as it was (no empty
// or partial draft, no temporary file).
func TestManifestInitUpstreamThatDoesNotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "axag.json")
	if err := os.WriteFile(out, []byte("earlier draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, childEnviron(), "manifest", "init", "--out", out,
		"--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=failing-upstream")
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	for _, want := range []string{"None of the specified directories are accessible", "exited (exit status 3) before it answered initialize", "nothing was written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("standard error does not say %q:\n%s", want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("standard output: %q", stdout)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "earlier draft\n" {
		t.Errorf("--out file now %q, %v; want it untouched", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the folder holds %d files, want only axag.json: %v", len(ents), ents)
	}
}

// TestManifestInitOut writes the draft to --out (and -o), not to standard
// output.
func TestManifestInitOut(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--out", "-o"} {
		dir := t.TempDir()
		out := filepath.Join(dir, "axag.json")
		stdout, stderr, code := cli(t, childEnviron(), "manifest", "init", flag, out,
			"--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=env-upstream")
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", flag, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: standard output %q, want nothing", flag, stdout)
		}
		b, err := os.ReadFile(out)
		if err != nil || !strings.Contains(string(b), `"operation_id": "env"`) {
			t.Errorf("%s: %s holds %q, %v", flag, out, b, err)
		}
		if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, %v; want 0644", flag, fi.Mode(), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: the folder holds %v, want only axag.json", flag, ents)
		}
	}
}

func TestManifestInitUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"manifest"}, "want a subcommand"},
		{[]string{"manifest", "draft"}, "unknown subcommand"},
		{[]string{"manifest", "init"}, "give the upstream"},
		{[]string{"manifest", "init", "--upstream-url", "http://x/mcp", "--upstream-command", "a"}, "not both"},
		{[]string{"manifest", "init", "--upstream-url", "x/mcp"}, "http or https URL"},
		{[]string{"manifest", "init", "--upstream-command", "a | b"}, "shell operator"},
		{[]string{"manifest", "init", "--upstream-command", "a", "--out", "no/such/folder/axag.json"}, "does not exist"},
	} {
		_, stderr, code := cli(t, nil, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	// An upstream that is not there is a failure, not a usage error.
	_, stderr, code := cli(t, map[string]string{"PATH": os.Getenv("PATH")}, "manifest", "init", "--upstream-command", "axgate-no-such-program-here")
	if code != exitFail || !strings.Contains(stderr, "connecting to the upstream") {
		t.Errorf("missing program: exit %d, %q", code, stderr)
	}
}
