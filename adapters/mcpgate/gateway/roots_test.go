package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestRootsChangedBounded: with ForwardClientRoots, a client's
// notifications/roots/list_changed is passed to the upstream within
// WithCallTimeout, as a call is: an upstream that does not take it loses
// the request, and the session goes on.
func TestRootsChangedBounded(t *testing.T) {
	t.Parallel()
	_, sdk := notesHandler()
	arrived, gaveUp := make(chan struct{}, 1), make(chan struct{}, 1)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("notifications/roots/list_changed")) {
			arrived <- struct{}{}
			select { // an upstream that never takes it
			case <-r.Context().Done():
				gaveUp <- struct{}{}
			case <-release:
			}
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithCallTimeout(500*time.Millisecond), gateway.ForwardClientRoots())
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := client.Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: serve(t, g), HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	t.Cleanup(func() { close(release) }) // first: a failing test does not hang on the upstream
	// The upstream session is up.
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read: %s", text(res))
	}
	client.AddRoots(&mcp.Root{URI: "file:///srv/notes"})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the roots notification did not reach the upstream")
	}
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway still waits for the upstream to take the notification, past WithCallTimeout")
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("read after the notification: %s", text(res))
	}
}

// fsGateway is the gateway of examples/mcpgateway/axag.json in front of
// server-filesystem started with dir, a child per client session; stderr
// receives the children's standard error.
func fsGateway(t *testing.T, dir string, stderr io.Writer, opts ...gateway.Option) *gateway.Gateway {
	t.Helper()
	node, program := serverFilesystem(t)
	m, err := manifest.LoadFile(filepath.Join(exampleDir, "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	base := []gateway.Option{gateway.WithBearer(fsAuthenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}), gateway.WithTrustClientElicitation()}
	g, err := gateway.New(enf, gateway.Upstream{Command: node, Args: []string{program, dir}, Stderr: stderr}, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// folders is two folders, each with a file: shared (what the upstream is
// started with) and outside, and the files' paths.
func folders(t *testing.T) (shared, outside, sharedFile, outsideFile string) {
	t.Helper()
	var err error
	for _, d := range []*string{&shared, &outside} {
		if *d, err = filepath.EvalSymlinks(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	sharedFile, outsideFile = filepath.Join(shared, "shared.txt"), filepath.Join(outside, "secret.txt")
	for f, content := range map[string]string{sharedFile: "shared content\n", outsideFile: "the content outside\n"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return shared, outside, sharedFile, outsideFile
}

// TestClientRootsNeverWidenTheUpstream: a caller without a role declares
// the roots capability, answers roots/list with file:/// and says its roots
// changed; server-filesystem keeps the one folder it was started with: it
// lists only that folder as allowed, refuses to read a file outside it, and
// never asks the caller for its roots. Over streamable HTTP and over stdio.
func TestClientRootsNeverWidenTheUpstream(t *testing.T) {
	t.Parallel()
	for _, front := range []string{"http", "stdio"} {
		t.Run(front, func(t *testing.T) {
			shared, outside, sharedFile, outsideFile := folders(t)
			g := fsGateway(t, shared, io.Discard, gateway.WithLocalPrincipal(fsPrincipals["carol-token"]))
			var asked atomic.Int32
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
			client.AddRoots(&mcp.Root{URI: "file:///"})
			client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "roots/list" {
						asked.Add(1)
					}
					return next(ctx, method, req)
				}
			})
			carol := connectFront(t, g, front, client, "carol-token")
			if res := call(t, carol, "read_text_file", map[string]any{"path": sharedFile}); res.IsError || !strings.Contains(text(res), "shared content") {
				t.Fatalf("read in the shared folder: %s", text(res))
			}
			// notifications/roots/list_changed, with the root of the outside folder.
			client.AddRoots(&mcp.Root{URI: "file://" + outside})
			for range 3 { // round trips through the upstream after the notification
				res := call(t, carol, "list_allowed_directories", map[string]any{})
				if got := text(res); res.IsError || !strings.Contains(got, shared) || strings.Contains(got, outside) || strings.Contains(got, "\n/\n") || strings.HasSuffix(got, "\n/") {
					t.Fatalf("list_allowed_directories: %q, want only %s", got, shared)
				}
				if res := call(t, carol, "read_text_file", map[string]any{"path": outsideFile}); !res.IsError || strings.Contains(text(res), "the content outside") {
					t.Fatalf("the caller read a file outside the shared folder: %s", text(res))
				}
			}
			if n := asked.Load(); n != 0 {
				t.Errorf("the upstream asked the caller for its roots %d times", n)
			}
		})
	}
}

// connectFront connects client to g's streamable HTTP front with token, or
// to its stdio front (the local principal).
func connectFront(t *testing.T, g *gateway.Gateway, front string, client *mcp.Client, token string) *mcp.ClientSession {
	t.Helper()
	var tr mcp.Transport = &mcp.StreamableClientTransport{
		Endpoint: serve(t, g), HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if front == "stdio" {
		ct, st := mcp.NewInMemoryTransports()
		go gateway.ServeLocal(g, ctx, st)
		tr = ct
	}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// stderrLines signals each line of a child's standard error that holds
// want.
type stderrLines struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	rest []byte
}

func (s *stderrLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rest = append(s.rest, p...)
	for {
		line, rest, ok := bytes.Cut(s.rest, []byte("\n"))
		if !ok {
			break
		}
		if bytes.Contains(line, []byte(s.want)) {
			select {
			case s.seen <- struct{}{}:
			default:
			}
		}
		s.rest = rest
	}
	return len(p), nil
}

// TestOperatorRootsAreTheUpstreams: with WithRoots, the operator's folder
// is what server-filesystem may read, in place of the one it was started
// with, whatever roots the caller declares.
func TestOperatorRootsAreTheUpstreams(t *testing.T) {
	t.Parallel()
	shared, operator, sharedFile, operatorFile := folders(t)
	updated := &stderrLines{want: "Updated allowed directories from MCP roots", seen: make(chan struct{}, 1)}
	g := fsGateway(t, shared, updated, gateway.WithRoots(&mcp.Root{URI: "file://" + operator}))
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///"})
	carol, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: serve(t, g), HTTPClient: &http.Client{Transport: bearer{"carol-token", http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { carol.Close() })
	// server-filesystem takes the roots after initialize, and says so: the
	// control session's child may say it first, so wait for the session's.
	for {
		res := call(t, carol, "list_allowed_directories", map[string]any{})
		if got := text(res); !res.IsError && strings.Contains(got, operator) {
			if strings.Contains(got, shared) || strings.Contains(got, "\n/\n") || strings.HasSuffix(got, "\n/") {
				t.Fatalf("list_allowed_directories: %q, want only %s", got, operator)
			}
			break
		}
		select {
		case <-updated.seen:
		case <-time.After(30 * time.Second):
			t.Fatal("server-filesystem never took the operator's roots")
		}
	}
	if res := call(t, carol, "read_text_file", map[string]any{"path": operatorFile}); res.IsError || !strings.Contains(text(res), "the content outside") {
		t.Errorf("read in the operator's folder: %s", text(res))
	}
	if res := call(t, carol, "read_text_file", map[string]any{"path": sharedFile}); !res.IsError {
		t.Errorf("read outside the operator's folder: %s", text(res))
	}
}

// TestRootsOptionsChecked: an operator root that is not a file:// URI of
// an absolute path, and operator roots with the client's, fail New.
func TestRootsOptionsChecked(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	for _, opts := range [][]gateway.Option{
		{gateway.WithRoots(&mcp.Root{URI: "https://example.com/"})},
		{gateway.WithRoots(&mcp.Root{URI: "file://relative/dir"})},
		{gateway.WithRoots(&mcp.Root{URI: "srv/notes"})},
		{gateway.WithRoots(&mcp.Root{URI: "file:///srv"}), gateway.ForwardClientRoots()},
	} {
		if g, err := newGatewayErr(t, gateway.Upstream{URL: upURL}, opts...); err == nil {
			g.Close()
			t.Errorf("New accepted %d options that contradict or are not roots", len(opts))
		}
	}
}
