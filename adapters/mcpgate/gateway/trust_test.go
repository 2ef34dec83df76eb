package gateway_test

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestClientElicitationIsNotThePersons pins the trust rule: a client that
// answers the gateway's confirmation question (form elicitation) with
// "accept" by itself, with no person behind it, writes nothing through a
// gateway built by default, and is not even asked; with
// WithTrustClientElicitation (the client is the person's own app) it is
// asked and its answer confirms the write. An approval never comes from
// elicitation, trusted or not. The upstream is the real server-filesystem;
// the client is the Go SDK's, over streamable HTTP.
func TestClientElicitationIsNotThePersons(t *testing.T) {
	t.Parallel()
	node, program := serverFilesystem(t)
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, trusted := range []bool{false, true} {
		name := "default"
		if trusted {
			name = "WithTrustClientElicitation"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			enf, err := axgate.New(m)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { enf.Close() })
			opts := []gateway.Option{gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"})}
			if trusted {
				opts = append(opts, gateway.WithTrustClientElicitation())
			}
			g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, root}, Stderr: io.Discard}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })

			// A client that accepts every form question by itself.
			var asked atomic.Int32
			robot := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				return accept(ctx, req)
			}})
			if caps := robot.InitializeResult(); caps == nil {
				t.Fatal("no initialize result")
			}
			path := filepath.Join(root, "robot.txt")
			res := call(t, robot, "write_file", map[string]any{"path": path, "content": "no person saw this"})
			_, statErr := os.Stat(path)
			if !trusted {
				wantRefusal(t, res, "AXAG_CONFIRMATION_MISSING", "")
				if statErr == nil {
					t.Fatal("the client's own accept wrote the file")
				}
				if n := asked.Load(); n != 0 {
					t.Errorf("the client was asked %d form questions by default, want none", n)
				}
			} else {
				if res.IsError {
					t.Fatalf("with WithTrustClientElicitation the accepted write was refused: %s", text(res))
				}
				if statErr != nil {
					t.Fatalf("with WithTrustClientElicitation the accepted write wrote nothing: %v", statErr)
				}
				if n := asked.Load(); n != 1 {
					t.Errorf("the client was asked %d form questions, want 1", n)
				}
			}

			// move_file needs an approval too: elicitation never gives one.
			src := filepath.Join(root, "src.txt")
			if err := os.WriteFile(src, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(root, "dst.txt")
			res = call(t, robot, "move_file", map[string]any{"source": src, "destination": dst})
			want := "AXAG_CONFIRMATION_MISSING"
			if trusted {
				want = "AXAG_APPROVAL_MISSING"
			}
			wantRefusal(t, res, want, "")
			if _, err := os.Stat(dst); err == nil {
				t.Fatal("the file moved with no approval")
			}
		})
	}
}

// pagesBase is where the enforcers of these tests say the pages for people
// are (axgate.WithDecisionPages); the person decides through the enforcer
// (Approvals().Decide) or its JSON endpoint (httpgate.NewHumanHandler).
const pagesBase = "http://people.example/"

// decisionsGateway is a gateway in front of server-filesystem (the folder
// root) whose enforcer holds decisions for the pages, with opts.
func decisionsGateway(t *testing.T, root string, enfOpts ...axgate.Option) (*axgate.Enforcer, *gateway.Gateway) {
	t.Helper()
	node, program := serverFilesystem(t)
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, append([]axgate.Option{axgate.WithDecisionPages(pagesBase)}, enfOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, root}, Stderr: io.Discard},
		gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return enf, g
}

// TestDecisionPagesThroughTheGateway: through the gateway (in front of the
// real server-filesystem, over streamable HTTP, the enforcer with
// axgate.WithDecisionPages), a client that declares URL-mode elicitation is
// sent to the page of a write waiting for the person's decision, and the
// write runs once they confirmed there; a denial writes nothing. A client
// that cannot be sent there gets the refusal naming the page, and the same
// call repeated after the decision writes, once; a second repeat is
// refused. The Go SDK's client asks for MCP 2026-07-28 and falls back to
// the front's 2025-11-25.
func TestDecisionPagesThroughTheGateway(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enf, g := decisionsGateway(t, root)
	url := serve(t, g)
	alice := fsPrincipals["alice-token"]
	ctx := context.Background()

	var sentTo []string
	decision := true
	browser := connect(t, url, "alice-token", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sentTo = append(sentTo, req.Params.Mode+" "+req.Params.URL)
			// The person decides on the page.
			if _, _, _, err := enf.Approvals().Decide(ctx, alice, req.Params.ElicitationID, decision, ""); err != nil {
				t.Errorf("deciding %s: %v", req.Params.ElicitationID, err)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if v := browser.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("the session speaks %s", v)
	}
	path := filepath.Join(root, "page.txt")
	args := map[string]any{"path": path, "content": "decided on the page"}
	if res := call(t, browser, "write_file", args); res.IsError {
		t.Fatalf("the write confirmed on its page: %s", text(res))
	}
	if len(sentTo) != 1 || !strings.HasPrefix(sentTo[0], "url "+pagesBase+"requests/cnf_") {
		t.Errorf("the client was sent to %q", sentTo)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "decided on the page" {
		t.Errorf("the file holds %q (%v)", data, err)
	}
	denied := filepath.Join(root, "denied.txt")
	decision = false
	r := wantRefusal(t, call(t, browser, "write_file", map[string]any{"path": denied, "content": "no"}), "AXAG_CONFIRMATION_MISSING", "declined")
	if _, err := os.Stat(denied); err == nil || len(sentTo) != 2 {
		t.Fatalf("a denied write: %v, sent to the page %d times; %v", err, len(sentTo), r.Details)
	}

	plain := connect(t, url, "alice-token", nil)
	other := filepath.Join(root, "plain.txt")
	args = map[string]any{"path": other, "content": "decided later"}
	r = wantRefusal(t, call(t, plain, "write_file", args), "AXAG_CONFIRMATION_MISSING", "")
	id, _ := r.Details["decision_id"].(string)
	if r.Details["decision_url"] != pagesBase+"requests/"+id || r.Details["agent_action"] == nil {
		t.Errorf("the refusal does not name the page: %v", r.Details)
	}
	if _, err := os.Stat(other); err == nil {
		t.Fatal("written before the decision")
	}
	if _, _, _, err := enf.Approvals().Decide(ctx, alice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	if res := call(t, plain, "write_file", args); res.IsError {
		t.Fatalf("the repeated call after the decision: %s", text(res))
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	r = refusalOf(t, call(t, plain, "write_file", args))
	if r.Code != "AXAG_CONFIRMATION_MISSING" {
		t.Errorf("a second repeat: %s %v", r.Code, r.Details)
	}
	if _, err := os.Stat(other); err == nil {
		t.Fatal("a second repeat wrote the file")
	}
}

// TestDecisionPagesRepeatOnAnotherReplica: two gateways whose enforcers
// share their stores (as replicas share Redis; cmd/axgate's
// TestMCPDecisionRepeatOnAnotherReplica runs it on Redis): the call refused
// on one, decided, repeated on the other, writes once; repeated again on
// either, it is refused.
func TestDecisionPagesRepeatOnAnotherReplica(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	replay := token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	approvals := memstore.NewApprovalStore(memstore.ApprovalOptions{})
	shared := []axgate.Option{axgate.WithReplayStore(replay), axgate.WithApprovalStore(approvals)}
	enfA, gA := decisionsGateway(t, root, shared...)
	_, gB := decisionsGateway(t, root, shared...)
	a, b := connect(t, serve(t, gA), "alice-token", nil), connect(t, serve(t, gB), "alice-token", nil)
	path := filepath.Join(root, "replica.txt")
	args := map[string]any{"path": path, "content": "written by replica B"}
	r := wantRefusal(t, call(t, a, "write_file", args), "AXAG_CONFIRMATION_MISSING", "")
	id, _ := r.Details["decision_id"].(string)
	if _, _, _, err := enfA.Approvals().Decide(context.Background(), fsPrincipals["alice-token"], id, true, ""); err != nil {
		t.Fatal(err)
	}
	if res := call(t, b, "write_file", args); res.IsError {
		t.Fatalf("the repeat on replica B: %s", text(res))
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*mcp.ClientSession{"A": a, "B": b} {
		if r := refusalOf(t, call(t, cs, "write_file", args)); r.Code != "AXAG_CONFIRMATION_MISSING" {
			t.Errorf("another repeat on replica %s: %s %v", name, r.Code, r.Details)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a repeat after the one that ran wrote the file")
	}
}

// TestDecisionPagesTypeScriptClients drives the gateway, in front of
// server-filesystem, with the official TypeScript SDK clients
// (examples/mcpgateway/decision.test.mjs): @modelcontextprotocol/client 2.4.0
// (2026-07-28 and multi round-trip requests; it falls back to the front's
// 2025-11-25) and @modelcontextprotocol/sdk 1.32.2 declaring URL-mode
// elicitation are sent to the page of the write, the person decides (the
// JSON endpoint of httpgate.NewHumanHandler), the retry writes once, a
// second is refused, a denial writes nothing; a client without elicitation
// gets the page in the refusal and its repeat after the decision writes
// once.
func TestDecisionPagesTypeScriptClients(t *testing.T) {
	t.Parallel()
	node, dir := installExample(t)
	script, err := os.ReadFile(filepath.Join(exampleDir, "decision.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Beside its node_modules, where its imports resolve.
	scriptPath := filepath.Join(dir, "decision-"+strconv.Itoa(os.Getpid())+".test.mjs")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(scriptPath)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enf, g := decisionsGateway(t, root)
	human := httptest.NewServer(httpgate.NewHumanHandler(enf, fsAuthenticate))
	defer human.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", filepath.Base(scriptPath))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+serve(t, g), "HUMAN_URL="+human.URL, "ROOT="+root,
		"BEARER=alice-token", "PERSON=alice-token")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test decision.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript clients failed: %v", err)
	}
}
