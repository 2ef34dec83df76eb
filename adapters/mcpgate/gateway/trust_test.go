package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
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

// heldDecisions stands in for the decisions of axgate.WithDecisionPages
// (the core's side of issue 30, built by another branch): until the person
// decided, write_file is refused with AXAG_CONFIRMATION_MISSING naming the
// page of the call (decision_id, decision_url, agent_action); once they
// confirmed, the same call (same arguments) passes once, with no token in
// hand; once they denied, it is refused with reason declined. Either way the
// next call records a new request. It serves the pages' POST
// /requests/{id} (decision=confirm|deny) as a person's browser would post
// it, without the sign-in and CSRF of the real pages.
type heldDecisions struct {
	mu    sync.Mutex
	base  string            // the pages' base URL, ending in "/"
	calls map[string]string // request id → "", "confirm" or "deny"
}

func newHeldDecisions(t *testing.T) *heldDecisions {
	h := &heldDecisions{calls: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /requests/{id}", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		d := r.FormValue("decision")
		if _, ok := h.calls[r.PathValue("id")]; !ok || (d != "confirm" && d != "deny") {
			http.Error(w, "no such request", http.StatusNotFound)
			return
		}
		h.calls[r.PathValue("id")] = d
		w.WriteHeader(http.StatusSeeOther)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h.base = srv.URL + "/"
	return h
}

// decideAll gives decision to every pending request.
func (h *heldDecisions) decideAll(decision string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, d := range h.calls {
		if d == "" {
			h.calls[id] = decision
		}
	}
}

func (h *heldDecisions) option() axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		var out []middleware.Stage
		for _, s := range std {
			if s.Name != middleware.StageConfirmation {
				out = append(out, s)
			}
		}
		return append(out, middleware.Stage{Name: middleware.StageConfirmation, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			if call.Tool != "write_file" {
				return next.Invoke(ctx, call)
			}
			digest, err := call.ArgsSHA256()
			if err != nil {
				return middleware.Result{}, err
			}
			id := digest[:16]
			h.mu.Lock()
			d, ok := h.calls[id]
			if d != "" {
				delete(h.calls, id)
			} else if !ok {
				h.calls[id] = ""
			}
			h.mu.Unlock()
			switch d {
			case "confirm":
				return next.Invoke(ctx, call)
			case "deny":
				return middleware.Result{}, axerr.New(axerr.CodeConfirmationMissing, "the person denied this call").WithReason("declined")
			}
			return middleware.Result{}, axerr.New(axerr.CodeConfirmationMissing, "write_file needs the person's confirmation").
				With("decision_id", id).With("decision_url", h.base+"requests/"+id).
				With("agent_action", "Show decision_url to the user, then call again with the same arguments.")
		}})
	})
}

// TestDecisionPageThroughTheGateway: through the gateway (in front of the
// real server-filesystem, over streamable HTTP), a client that declares
// URL-mode elicitation is sent to the page of a write waiting for the
// person's decision, and the write runs once they decided there; a client
// that cannot be sent there gets the refusal naming the page, and the same
// call repeated after the decision writes, once. The Go SDK's client asks
// for MCP 2026-07-28 and falls back to the front's 2025-11-25.
func TestDecisionPageThroughTheGateway(t *testing.T) {
	t.Parallel()
	node, program := serverFilesystem(t)
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHeldDecisions(t)
	enf, err := axgate.New(m, h.option())
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
	url := serve(t, g)

	var sentTo []string
	browser := connect(t, url, "alice-token", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sentTo = append(sentTo, req.Params.Mode+" "+req.Params.URL)
			h.decideAll("confirm") // the person decides on the page
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if v := browser.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("the session speaks %s", v)
	}
	path := filepath.Join(root, "page.txt")
	if res := call(t, browser, "write_file", map[string]any{"path": path, "content": "decided on the page"}); res.IsError {
		t.Fatalf("the write decided on its page: %s", text(res))
	}
	if len(sentTo) != 1 || !strings.HasPrefix(sentTo[0], "url "+h.base+"requests/") {
		t.Errorf("the client was sent to %q", sentTo)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "decided on the page" {
		t.Errorf("the file holds %q (%v)", data, err)
	}

	plain := connect(t, url, "alice-token", nil)
	other := filepath.Join(root, "plain.txt")
	args := map[string]any{"path": other, "content": "decided later"}
	r := wantRefusal(t, call(t, plain, "write_file", args), "AXAG_CONFIRMATION_MISSING", "")
	if page, _ := r.Details["decision_url"].(string); !strings.HasPrefix(page, h.base+"requests/") || r.Details["agent_action"] == nil {
		t.Errorf("the refusal does not name the page: %v", r.Details)
	}
	if _, err := os.Stat(other); err == nil {
		t.Fatal("written before the decision")
	}
	h.decideAll("confirm")
	if res := call(t, plain, "write_file", args); res.IsError {
		t.Fatalf("the repeated call after the decision: %s", text(res))
	}
	wantRefusal(t, call(t, plain, "write_file", args), "AXAG_CONFIRMATION_MISSING", "")
}

// TestDecisionPagesTypeScriptClients drives the gateway, in front of
// server-filesystem, with the official TypeScript SDK clients
// (examples/mcpgateway/decision.test.mjs): @modelcontextprotocol/client 2.4.0
// (2026-07-28 and multi round-trip requests; it falls back to the front's
// 2025-11-25) and @modelcontextprotocol/sdk 1.32.2 declaring URL-mode
// elicitation are sent to the page of the write, the person decides there,
// the retry writes once and a denial writes nothing; a client without
// elicitation gets the page in the refusal and its repeat after the
// decision writes once.
func TestDecisionPagesTypeScriptClients(t *testing.T) {
	t.Parallel()
	node, dir := installExample(t)
	program := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
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
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHeldDecisions(t)
	enf, err := axgate.New(m, h.option())
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, root}, Stderr: io.Discard},
		gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", filepath.Base(scriptPath))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+serve(t, g), "ROOT="+root, "BEARER=alice-token")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test decision.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript clients failed: %v", err)
	}
}
