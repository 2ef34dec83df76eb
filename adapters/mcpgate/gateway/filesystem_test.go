package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestServerFilesystem runs the gateway in front of a real third-party MCP
// server nobody here wrote, @modelcontextprotocol/server-filesystem (a
// child per client session, over stdio), with examples/mcpgateway/axag.json
// (its tools pinned), driven by the Go SDK's client over streamable HTTP.
func TestServerFilesystem(t *testing.T) {
	t.Parallel()
	node, program := serverFilesystem(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(root, "notes.txt")
	if err := os.WriteFile(notes, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, axgate.WithSigningKey(signer))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	var lg logs
	g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, root}, Stderr: io.Discard},
		gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}), gateway.WithTrustClientElicitation(),
		gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if strings.Contains(lg.String(), "upstream tool changed") {
		t.Fatalf("the pins of examples/mcpgateway/axag.json do not match server-filesystem:\n%s", lg.String())
	}
	url := serve(t, g)
	ctx := context.Background()
	content := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(data)
	}

	carol := connect(t, url, "carol-token", nil)
	alice := connect(t, url, "alice-token", nil)
	reads := []string{"read_text_file", "read_multiple_files", "search_files", "get_file_info", "list_directory", "directory_tree", "list_allowed_directories"}
	if got := listNames(t, carol); !sameSet(got, reads) {
		t.Errorf("carol lists %v, want the reads %v", got, reads)
	}
	writes := append(slices.Clone(reads), "write_file", "edit_file", "move_file", "create_directory")
	if got := listNames(t, alice); !sameSet(got, writes) {
		t.Errorf("alice lists %v, want %v", got, writes)
	}

	// A read.
	res := call(t, carol, "read_text_file", map[string]any{"path": notes})
	if res.IsError || !strings.Contains(text(res), "hello") {
		t.Fatalf("read_text_file: %s", text(res))
	}
	// The manifest's checks the server does not make.
	wantRefusal(t, call(t, carol, "read_text_file", map[string]any{"path": notes, "head": 1, "tail": 1}), "AXAG_PRECONDITION_FAILED", "constraint_failed")

	// Refused writes.
	wantRefusal(t, call(t, carol, "write_file", map[string]any{"path": notes, "content": "carol was here"}), "AXAG_ROLE_INSUFFICIENT", "role_missing")
	wantRefusal(t, call(t, alice, "write_file", map[string]any{"path": notes, "content": "unconfirmed"}), "AXAG_CONFIRMATION_MISSING", "")
	if got := content(notes); got != "hello\n" {
		t.Fatalf("a refused write changed the file: %q", got)
	}

	// A write the person confirms, and one the person declines.
	var asked []string
	yes := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return accept(ctx, req)
	}})
	if res := call(t, yes, "write_file", map[string]any{"path": notes, "content": "confirmed"}); res.IsError {
		t.Fatalf("confirmed write: %s", text(res))
	}
	if got := content(notes); got != "confirmed" {
		t.Errorf("after a confirmed write the file holds %q", got)
	}
	if len(asked) != 1 || asked[0] != "Write "+notes+", replacing what it holds?" {
		t.Errorf("the person was asked %q", asked)
	}
	no := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: decline})
	wantRefusal(t, call(t, no, "write_file", map[string]any{"path": notes, "content": "declined"}), "AXAG_CONFIRMATION_MISSING", "declined")
	if got := content(notes); got != "confirmed" {
		t.Errorf("a declined write changed the file: %q", got)
	}

	// A move needs the person's confirmation and an approver.
	moved := filepath.Join(root, "moved.txt")
	move := map[string]any{"source": notes, "destination": moved}
	r := wantRefusal(t, call(t, yes, "move_file", move), "AXAG_APPROVAL_MISSING", "")
	reqID, _ := r.Details["approval_request_id"].(string)
	if reqID == "" {
		t.Fatalf("no approval request in %+v", r.Details)
	}
	if _, err := os.Stat(moved); err == nil {
		t.Fatal("the file moved without an approval")
	}
	_, token, _, err := enf.Approvals().Decide(ctx, fsPrincipals["bob-token"], reqID, true, "fine")
	if err != nil {
		t.Fatal(err)
	}
	res, err = yes.CallTool(ctx, &mcp.CallToolParams{Name: "move_file", Arguments: move,
		Meta: mcpgate.CredentialsMeta(middleware.Credentials{Approvals: []string{token}})})
	if err != nil || res.IsError {
		t.Fatalf("approved move: %v %s", err, text(res))
	}
	if got := content(moved); got != "confirmed" {
		t.Errorf("after the approved move %s holds %q", moved, got)
	}

	// A tool of the server the manifest does not declare.
	wantRefusal(t, call(t, carol, "read_media_file", map[string]any{"path": moved}), "AXAG_INTENT_NOT_FOUND", "")
	wantRefusal(t, call(t, carol, "read_file", map[string]any{"path": moved}), "AXAG_INTENT_NOT_FOUND", "")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestServerFilesystemPins prints the pins of server-filesystem's tools
// (AXGATE_PRINT_PINS=1), to update examples/mcpgateway/axag.json when the
// pinned version changes (axgate manifest init writes them too).
func TestServerFilesystemPins(t *testing.T) {
	t.Parallel()
	if os.Getenv("AXGATE_PRINT_PINS") == "" {
		t.Skip("set AXGATE_PRINT_PINS=1 to print the pins")
	}
	node, program := serverFilesystem(t)
	cmd := exec.Command(node, program, t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pins", Version: "v1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	pins := map[string]string{}
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if pins[tl.Name], err = mcpgate.ToolDigest(tl); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := json.MarshalIndent(pins, "", "  ")
	t.Logf("%s", out)
}

// TestServerFilesystemNodeClient drives the gateway in front of
// server-filesystem with the official TypeScript SDK client
// (examples/mcpgateway/client.test.mjs): over streamable HTTP as three
// callers, with an approver deciding on httpgate's person-facing endpoints,
// and over stdio, the test binary serving the gateway
// (serveFilesystemStdio).
func TestServerFilesystemNodeClient(t *testing.T) {
	t.Parallel()
	node, dir := installExample(t)
	program := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	script, err := os.ReadFile(filepath.Join(exampleDir, "client.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Beside its node_modules, where its imports resolve.
	scriptPath := filepath.Join(dir, "client-"+strconv.Itoa(os.Getpid())+".test.mjs")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(scriptPath)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	manifestPath, err := filepath.Abs(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.LoadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, axgate.WithSigningKey(signer))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, root}, Stderr: io.Discard},
		gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}), gateway.WithTrustClientElicitation())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	human := httptest.NewServer(httpgate.NewHumanHandler(enf, fsAuthenticate))
	defer human.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", filepath.Base(scriptPath))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"MCP_URL="+serve(t, g), "HUMAN_URL="+human.URL, "ROOT="+root, "GATEWAY_COMMAND="+os.Args[0],
		frontEnv+"=stdio", "AXGATE_TEST_MANIFEST="+manifestPath, "AXGATE_TEST_NODE="+node,
		"AXGATE_TEST_PROGRAM="+program, "AXGATE_TEST_ROOT="+root)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test client.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v", err)
	}
}
