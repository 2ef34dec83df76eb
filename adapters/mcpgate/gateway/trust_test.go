package gateway_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
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
