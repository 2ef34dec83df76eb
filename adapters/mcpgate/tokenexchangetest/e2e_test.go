package tokenexchangetest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
)

// The callers of the end-to-end test: alice edits, bob only views.
var e2eRoles = map[string][]string{"alice": {"editor"}, "bob": {"viewer"}}

// TestOneGatewayThreeUpstreams is issue 31's first "done when", every part
// real, the gateway twice: the axgate binary (built from cmd/axgate) running
// "axgate mcp --config" with an upstreams: section, and gateway.NewMulti in
// the test on a real listener. Behind it,
// @modelcontextprotocol/server-filesystem (sandboxed under
// bubblewrap, only its folder visible) and @modelcontextprotocol/server-memory
// (plain) as command upstreams, pinned by testdata/node/package-lock.json,
// and a Go upstream over HTTP that takes only tokens of its own audience,
// which the gateway exchanges per caller (RFC 8693) at zitadel/oidc's
// authorization server; the callers are the official TypeScript SDK
// clients (alice on @modelcontextprotocol/client 2.x, MCP 2026-07-28; bob
// on @modelcontextprotocol/sdk 1.x, 2025-11-25), each with a bearer token
// of its own and different roles.
//
//   - Each lists exactly the tools its roles allow, of the three upstreams,
//     and calls a tool of each.
//   - The Go upstream sees, for each caller, a token the authorization
//     server issued for that caller and the upstream's audience, never a
//     caller's own token.
//   - bob widens his roots to / (and the outside folder); they reach
//     server-filesystem (forward_client_roots), which then lists / as
//     allowed: reading a file outside its folder still fails, and its
//     content never reaches bob.
//   - With server-memory's children killed, its tools are refused with
//     reason upstream_unavailable while the other two upstreams answer;
//     with the Go upstream stopped too, server-filesystem still answers.
//   - No caller's token, nor any token sent to the Go upstream, is in the
//     gateway's log.
func TestOneGatewayThreeUpstreams(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode: it installs the TypeScript SDK clients and two MCP servers with npm")
	}
	requireSandbox(t)
	node, modules := installNode(t)
	t.Run("axgate mcp --config", func(t *testing.T) { testOneGateway(t, node, modules, startAxgate) })
	t.Run("gateway.NewMulti", func(t *testing.T) { testOneGateway(t, node, modules, startGateway) })
}

// e2e is what a gateway of the end-to-end test is started with.
type e2e struct {
	r              *rig
	node, modules  string
	shared, memory string // server-filesystem's folder, server-memory's file
	mark           string // in server-memory's environment
	// stderr takes the standard error of server-filesystem's children.
	stderr io.Writer
}

// script is the program of the installed package @modelcontextprotocol/name.
func (e *e2e) script(name string) string {
	return filepath.Join(e.modules, "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
}

func testOneGateway(t *testing.T, node, modules string, start func(*testing.T, *e2e) *front) {
	shared, outside := tempDir(t), tempDir(t)
	sharedFile, outsideFile := filepath.Join(shared, "shared.txt"), filepath.Join(outside, "secret.txt")
	const secret = "the content outside the folder"
	for f, content := range map[string]string{sharedFile: "shared content\n", outsideFile: secret + "\n"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	r := &rig{idp: newIDP(t)}
	r.as, r.issuer = startAS(t, r.idp)
	r.up, r.upURL = startUpstream(t, r.issuer)
	r.callerTokens = map[string]string{}
	for user, roles := range e2eRoles {
		r.callerTokens[user] = r.idp.tokenWithRoles(t, user, roles)
	}

	mark := newMark(t)
	fsLog := &stderrLines{want: "Updated allowed directories from MCP roots", seen: make(chan string, 1)}
	front := start(t, &e2e{r: r, node: node, modules: modules, shared: shared, memory: filepath.Join(tempDir(t), "memory.jsonl"),
		mark: mark, stderr: fsLog})
	cl := startClients(t, node, modules)

	// alice on the 2.x client asks for the stateless protocol; bob on 1.x
	// has sessions, and declares roots (the shared folder, for now).
	if v := front.connect(t, cl, "alice", "client", r.callerTokens["alice"], nil); v != "2026-07-28" {
		t.Errorf("alice's 2.x client negotiated MCP %s, want 2026-07-28", v)
	}
	if v := front.connect(t, cl, "bob", "sdk", r.callerTokens["bob"], []string{"file://" + shared}); v != "2025-11-25" {
		t.Errorf("bob's 1.x client negotiated MCP %s, want 2025-11-25", v)
	}

	t.Run("the union, filtered per caller", func(t *testing.T) {
		want := map[string][]string{
			"alice": {"fs_list_allowed_directories", "fs_read_text_file", "fs_write_file", "memory_create_entities", "memory_read_graph", "notes_whoami"},
			"bob":   {"fs_list_allowed_directories", "fs_read_text_file", "memory_read_graph", "notes_whoami"},
		}
		for user, names := range want {
			if got := front.list(t, cl, user); !slices.Equal(got, names) {
				t.Errorf("%s lists %q, want exactly %q", user, got, names)
			}
		}
	})

	t.Run("each caller calls each upstream", func(t *testing.T) {
		for _, user := range []string{"alice", "bob"} {
			if res := front.call(t, cl, user, "fs_read_text_file", map[string]any{"path": sharedFile}); res.IsError || !strings.Contains(res.text(), "shared content") {
				t.Errorf("%s reading the shared file: %+v", user, res)
			}
			if res := front.call(t, cl, user, "notes_whoami", map[string]any{}); res.IsError || !strings.Contains(res.text(), `"sub":"`+user+`"`) {
				t.Errorf("%s's whoami: %+v", user, res)
			}
		}
		ent := map[string]any{"entities": []any{map[string]any{"name": "axgate", "entityType": "project", "observations": []any{"written by alice"}}}}
		if res := front.call(t, cl, "alice", "memory_create_entities", ent); res.IsError {
			t.Errorf("alice's create_entities: %+v", res)
		}
		// bob's own child of server-memory reads the graph file alice's wrote.
		if res := front.call(t, cl, "bob", "memory_read_graph", map[string]any{}); res.IsError || !strings.Contains(res.text(), "written by alice") {
			t.Errorf("bob's read_graph: %+v", res)
		}
		// What bob's roles do not allow does not happen.
		if res := front.call(t, cl, "bob", "memory_create_entities", ent); !res.IsError {
			t.Errorf("bob (viewer) created entities: %+v", res)
		}
		if res := front.call(t, cl, "bob", "fs_write_file", map[string]any{"path": filepath.Join(shared, "bob.txt"), "content": "x"}); !res.IsError || fileExists(filepath.Join(shared, "bob.txt")) {
			t.Errorf("bob (viewer) wrote a file: %+v", res)
		}
	})

	t.Run("the Go upstream sees an exchanged token per caller", func(t *testing.T) {
		r.up.mu.Lock()
		defer r.up.mu.Unlock()
		subs := map[string]bool{}
		for raw := range r.up.tokens {
			for user, own := range r.callerTokens {
				if raw == own {
					t.Errorf("the upstream saw %s's own token", user)
				}
			}
			claims := jwt.MapClaims{}
			if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
				t.Errorf("the upstream saw a token that is not a JWT: %v", err)
				continue
			}
			sub, _ := claims.GetSubject()
			aud, _ := claims.GetAudience()
			iss, _ := claims.GetIssuer()
			if !slices.Contains(aud, upstreamAud) || iss != r.issuer {
				t.Errorf("the upstream saw a token of %s for %q from %q, want audience %s from %s", sub, aud, iss, upstreamAud, r.issuer)
			}
			subs[sub] = true
		}
		for _, user := range []string{"alice", "bob"} {
			if !subs[user] {
				t.Errorf("the upstream saw no token for %s (subjects %v)", user, subs)
			}
		}
		if len(subs) != 3 { // alice, bob and the gateway's service user
			t.Errorf("the upstream saw tokens for %v, want alice, bob and the gateway's service user", subs)
		}
		if !slices.Contains(r.up.calls, "alice") || !slices.Contains(r.up.calls, "bob") {
			t.Errorf("the upstream's calls were for %q", r.up.calls)
		}
	})

	t.Run("widened roots do not widen the sandbox", func(t *testing.T) {
		// bob widens his roots to / (and the outside folder): the gateway
		// forwards them to server-filesystem, which asks for them again.
		// (After connecting: the roots/list server-filesystem sends at its
		// start is forwarded before the 1.x client has opened its stream
		// for the server's requests, and fails: "stream not connected".)
		front.roots(t, cl, "bob", []string{"file:///", "file://" + outside})
		bound := time.After(time.Minute) // a bound, not a pause
		for widened := false; !widened; {
			select {
			case <-fsLog.seen:
			case <-bound:
				t.Fatalf("server-filesystem never took bob's root /; its log:\n%s", fsLog)
			}
			res := front.call(t, cl, "bob", "fs_list_allowed_directories", map[string]any{})
			widened = !res.IsError && slices.Contains(strings.Split(res.text(), "\n"), "/")
		}
		for _, path := range []string{outsideFile, "/etc/shadow", filepath.Join(modules, "package.json")} {
			res := front.call(t, cl, "bob", "fs_read_text_file", map[string]any{"path": path})
			if !res.IsError || strings.Contains(res.raw, secret) {
				t.Errorf("the sandboxed server read %s, outside its folder: %+v", path, res)
			}
		}
		// The folder itself stays readable.
		if res := front.call(t, cl, "bob", "fs_read_text_file", map[string]any{"path": sharedFile}); res.IsError {
			t.Errorf("bob reading the shared file after the widening: %+v", res)
		}
	})

	t.Run("one upstream killed, the others answer", func(t *testing.T) {
		pids := marked(mark)
		if len(pids) == 0 {
			t.Fatal("no process of server-memory runs")
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		for _, user := range []string{"alice", "bob"} {
			res := front.call(t, cl, user, "memory_read_graph", map[string]any{})
			if code, reason, up := res.refusal(); code != "AXGATE_STORE_UNAVAILABLE" || reason != "upstream_unavailable" || up != "memory" {
				t.Errorf("%s's read_graph with server-memory killed: %s, %q of %q, want AXGATE_STORE_UNAVAILABLE, upstream_unavailable of memory: %+v", user, code, reason, up, res)
			}
			if res := front.call(t, cl, user, "fs_read_text_file", map[string]any{"path": sharedFile}); res.IsError || !strings.Contains(res.text(), "shared content") {
				t.Errorf("%s reading the shared file with server-memory killed: %+v", user, res)
			}
			if res := front.call(t, cl, user, "notes_whoami", map[string]any{}); res.IsError || !strings.Contains(res.text(), `"sub":"`+user+`"`) {
				t.Errorf("%s's whoami with server-memory killed: %+v", user, res)
			}
		}
	})

	t.Run("the Go upstream stopped, the others answer", func(t *testing.T) {
		r.up.srv.CloseClientConnections()
		r.up.srv.Close()
		for _, user := range []string{"alice", "bob"} {
			res := front.call(t, cl, user, "notes_whoami", map[string]any{})
			if code, reason, up := res.refusal(); code != "AXGATE_STORE_UNAVAILABLE" || reason != "upstream_unavailable" || up != "notes" {
				t.Errorf("%s's whoami with the Go upstream stopped: %s, %q of %q, want AXGATE_STORE_UNAVAILABLE, upstream_unavailable of notes: %+v", user, code, reason, up, res)
			}
			if code, _, _ := front.call(t, cl, user, "memory_read_graph", map[string]any{}).refusal(); code != "AXGATE_STORE_UNAVAILABLE" {
				t.Errorf("%s's read_graph with server-memory still down: %s", user, code)
			}
			if res := front.call(t, cl, user, "fs_read_text_file", map[string]any{"path": sharedFile}); res.IsError || !strings.Contains(res.text(), "shared content") {
				t.Errorf("%s reading the shared file with the Go upstream stopped: %+v", user, res)
			}
		}
	})

	t.Run("no caller's token in the gateway's log", func(t *testing.T) {
		log := front.log.String()
		if !strings.Contains(log, "level=") && !strings.Contains(log, `"level"`) {
			t.Fatalf("the gateway's log is empty: %q", log)
		}
		for user, tok := range r.callerTokens {
			if strings.Contains(log, tok) {
				t.Errorf("%s's token is in the gateway's log", user)
			}
		}
		r.up.mu.Lock()
		defer r.up.mu.Unlock()
		for tok := range r.up.tokens {
			if strings.Contains(log, tok) {
				t.Errorf("a token the gateway sent the Go upstream is in its log")
			}
		}
	})
}

// tokenWithRoles is a token of the IdP for sub with roles.
func (i *idp) tokenWithRoles(t *testing.T, sub string, roles []string) string {
	t.Helper()
	now := time.Now()
	tok, err := i.signer.Sign("JWT", jwt.MapClaims{"iss": "https://id.example.com", "sub": sub, "aud": gatewayAud,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "roles": roles})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// enforcer is an enforcer of testdata/e2e/name.
func enforcer(t *testing.T, name string) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.LoadFile(filepath.Join("testdata", "e2e", name))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	return enf
}

// gatewayOptions are the options of the test's gateway: the callers'
// bearer tokens of the IdP, and its log (debug level) to log.
func gatewayOptions(t *testing.T, r *rig, log io.Writer) []gateway.Option {
	t.Helper()
	bearer, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(r.idp.keys), Issuer: "https://id.example.com", Audience: gatewayAud})
	if err != nil {
		t.Fatal(err)
	}
	return []gateway.Option{gateway.WithBearer(bearer, &oauthex.ProtectedResourceMetadata{Resource: gatewayAud}),
		gateway.WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))}
}

// requireSandbox skips the test where bubblewrap cannot run, unless
// AXGATE_TEST_SANDBOX=required (CI), where it fails.
func requireSandbox(t *testing.T) {
	t.Helper()
	if _, err := childproc.FindBwrap(false); err != nil {
		if os.Getenv("AXGATE_TEST_SANDBOX") == "required" {
			t.Fatalf("AXGATE_TEST_SANDBOX=required, but: %v", err)
		}
		t.Skipf("end-to-end test skipped: no sandbox here (apt-get install -y bubblewrap): %v", err)
	}
}

// tempDir is a temporary folder, its symbolic links resolved (as
// server-filesystem compares paths).
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// newMark is an environment variable that marks a test's processes; those
// left at the test's end are killed.
func newMark(t *testing.T) string {
	mark := "AXGATE_E2E_TEST_MARK=" + strings.ToLower(rand.Text())
	t.Cleanup(func() {
		for _, pid := range marked(mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return mark
}

// marked lists the running processes whose environment holds mark.
func marked(mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == mark }) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// stderrLines signals each line of a child's standard error that holds
// want (the line, or nothing when the last one was not taken yet).
type stderrLines struct {
	want string
	seen chan string
	mu   sync.Mutex
	rest []byte
	all  strings.Builder
}

// String is every line seen.
func (s *stderrLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.String()
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
		if s.want != "" && bytes.Contains(line, []byte(s.want)) {
			select {
			case s.seen <- string(line):
			default:
			}
		}
		s.all.Write(append(line, '\n'))
		s.rest = rest
	}
	return len(p), nil
}

// installNode is testdata/node's node_modules (npm ci, once per lock
// file, in the user's cache), or the folder AXGATE_E2E_NODE_DIR names; it
// skips without node or npm.
func installNode(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("end-to-end test skipped: node is not installed (the TypeScript SDK clients and the MCP servers need it)")
	}
	if d := os.Getenv("AXGATE_E2E_NODE_DIR"); d != "" {
		return node, d
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("end-to-end test skipped: npm is not installed (to install the TypeScript SDK clients and the MCP servers)")
	}
	h := sha256.New()
	files := map[string][]byte{}
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "node", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
		h.Write(data)
	}
	parent := filepath.Join(os.TempDir(), "axgate-test")
	if c, err := os.UserCacheDir(); err == nil {
		parent = filepath.Join(c, "axgate-test")
	}
	final := filepath.Join(parent, "e2e-"+hex.EncodeToString(h.Sum(nil)[:8]))
	installed := func() bool {
		_, err := os.Stat(filepath.Join(final, "node_modules", ".package-lock.json"))
		return err == nil
	}
	if installed() {
		return node, final
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(parent, "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// --ignore-scripts: nothing of the dependencies runs at install time.
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of testdata/node: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil && !installed() {
		t.Fatal(err)
	}
	return node, final
}

// clients is testdata/node/client.mjs: TypeScript SDK clients the test
// drives with JSON lines.
type clients struct {
	in     io.Writer
	mu     sync.Mutex
	events map[string]chan clientEvent
	exited chan struct{}
	stderr *strings.Builder
}

type clientEvent struct {
	Ev      string          `json:"ev"`
	ID      string          `json:"id"`
	Version string          `json:"version"`
	Tools   []string        `json:"tools"`
	Message string          `json:"message"`
	Result  json.RawMessage `json:"result"`
}

// outcome is a tool call's result as the client got it.
type outcome struct {
	IsError           bool `json:"isError"`
	StructuredContent struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	} `json:"structuredContent"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	raw string
}

// text is the text of the result's content.
func (o *outcome) text() string {
	var b strings.Builder
	for _, c := range o.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// refusal is the code, reason and upstream of a refusal ("" when it is
// none).
func (o *outcome) refusal() (code, reason, upstream string) {
	if !o.IsError {
		return "", "", ""
	}
	reason, _ = o.StructuredContent.Error.Details["reason"].(string)
	upstream, _ = o.StructuredContent.Error.Details["upstream"].(string)
	return o.StructuredContent.Error.Code, reason, upstream
}

func (o *outcome) String() string { return o.raw }

func startClients(t *testing.T, node, modules string) *clients {
	t.Helper()
	// A folder of its own whose node_modules is the installation's.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "node", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(modules, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &clients{in: in, events: map[string]chan clientEvent{}, exited: make(chan struct{}), stderr: &strings.Builder{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.exited)
		lines := bufio.NewScanner(out)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var ev clientEvent
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				continue
			}
			c.channel(ev.ID) <- ev
		}
	}()
	t.Cleanup(func() {
		in.(io.Closer).Close()
		<-c.exited
		_ = cmd.Wait()
	})
	return c
}

func (c *clients) channel(id string) chan clientEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.events[id]
	if !ok {
		ch = make(chan clientEvent, 16)
		c.events[id] = ch
	}
	return ch
}

// do sends cmd and returns the answer of its client (at most a minute: a
// bound, not a pause).
func (c *clients) do(t *testing.T, cmd map[string]any) clientEvent {
	t.Helper()
	line, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("the clients: %v", err)
	}
	id, _ := cmd["id"].(string)
	select {
	case ev := <-c.channel(id):
		if ev.Ev == "error" {
			t.Fatalf("the client %s: %s", id, ev.Message)
		}
		return ev
	case <-c.exited:
		t.Fatalf("the clients exited:\n%s", c.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("no answer from the client %s in a minute", id)
	}
	return clientEvent{}
}

// front is the one gateway's endpoint, where the callers connect.
type front struct {
	url string
	log fmt.Stringer // the gateway's log
}

// startGateway serves the three upstreams behind one gateway
// (gateway.NewMulti) on a real listener.
func startGateway(t *testing.T, e *e2e) *front {
	t.Helper()
	ups := []gateway.Named{
		{
			Name:     "fs",
			Enforcer: enforcer(t, "filesystem.axag.json"),
			Upstream: gateway.Upstream{Command: e.node, Args: []string{e.script("server-filesystem"), e.shared}, Stderr: e.stderr},
			// The client's roots reach the server: the sandbox, not the
			// server's own check, keeps it in its folder.
			Options: []gateway.Option{gateway.ForwardClientRoots(), gateway.WithSandbox(gateway.Sandbox{Mode: "on",
				ReadOnly: []string{filepath.Join(e.modules, "node_modules")}, Writable: []string{e.shared}})},
		},
		{
			Name:     "memory",
			Enforcer: enforcer(t, "memory.axag.json"),
			Upstream: gateway.Upstream{Command: e.node, Args: []string{e.script("server-memory")},
				Env: []string{"MEMORY_FILE_PATH=" + e.memory, e.mark}},
			// Once killed, it stays down for the rest of the test.
			Options: []gateway.Option{gateway.WithRestartBackoff(time.Hour, time.Hour)},
		},
		{
			Name:     "notes",
			Enforcer: enforcer(t, "notes.axag.json"),
			Upstream: gateway.Upstream{URL: e.r.upURL, Credentials: &gateway.UpstreamCredentials{
				// The gateway's own session (its pins at start) has no
				// caller: the gateway's service user.
				ClientCredentials: &clientcredentials.Config{TokenURL: e.r.issuer + "/oauth/token", ClientID: "sid1", ClientSecret: "verysecret"},
				TokenExchange: &gateway.TokenExchange{TokenURL: e.r.issuer + "/oauth/token", ClientID: gatewayClient, ClientSecret: gatewaySecret,
					Audience: upstreamAud},
			}},
		},
	}
	log := &stderrLines{seen: make(chan string)}
	g, err := gateway.NewMulti(ups, gatewayOptions(t, e.r, log)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	return &front{url: hs.URL + "/mcp", log: log}
}

// connect connects user's client (sdk "client" or "sdk") with bearer,
// declaring roots (nil: not the capability): the protocol version
// negotiated.
func (f *front) connect(t *testing.T, c *clients, user, sdk, bearer string, roots []string) string {
	t.Helper()
	ev := c.do(t, map[string]any{"op": "connect", "id": user, "sdk": sdk, "url": f.url, "bearer": bearer, "roots": roots})
	if ev.Ev != "connected" {
		t.Fatalf("connecting %s: %+v", user, ev)
	}
	return ev.Version
}

// roots replaces user's roots and says they changed.
func (f *front) roots(t *testing.T, c *clients, user string, roots []string) {
	t.Helper()
	if ev := c.do(t, map[string]any{"op": "roots", "id": user, "roots": roots}); ev.Ev != "roots" {
		t.Fatalf("%s's roots: %+v", user, ev)
	}
}

// list is the sorted names of the tools user is offered.
func (f *front) list(t *testing.T, c *clients, user string) []string {
	t.Helper()
	names := c.do(t, map[string]any{"op": "list", "id": user}).Tools
	slices.Sort(names)
	return names
}

// call calls tool as user.
func (f *front) call(t *testing.T, c *clients, user, tool string, args map[string]any) *outcome {
	t.Helper()
	ev := c.do(t, map[string]any{"op": "call", "id": user, "tool": tool, "args": args})
	if ev.Ev != "result" {
		t.Fatalf("%s calling %s: %+v", user, tool, ev)
	}
	o := &outcome{raw: string(ev.Result)}
	if err := json.Unmarshal(ev.Result, o); err != nil {
		t.Fatalf("%s calling %s: %v", user, tool, err)
	}
	return o
}

// startAxgate runs the axgate binary (built from cmd/axgate) as "axgate mcp
// --config" with the three upstreams in the configuration file's
// upstreams: section.
func startAxgate(t *testing.T, e *e2e) *front {
	t.Helper()
	bin := buildAxgate(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jwks, err := e.r.idp.signer.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := filepath.Abs(filepath.Join("testdata", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a YAML string
	tokenURL := q(e.r.issuer + "/oauth/token")
	config := file("axgate.yaml", `upstreams:
  - name: fs
    command: `+q(e.node)+`
    args: [`+q(e.script("server-filesystem"))+`, `+q(e.shared)+`]
    manifest: `+q(filepath.Join(manifests, "filesystem.axag.json"))+`
    # The client's roots reach the server: the sandbox, not the server's
    # own check, keeps it in its folder.
    forward_client_roots: true
    sandbox: {mode: "on", ro: [`+q(filepath.Join(e.modules, "node_modules"))+`], rw: [`+q(e.shared)+`]}
  - name: memory
    command: `+q(e.node)+`
    args: [`+q(e.script("server-memory"))+`]
    env: [`+q("MEMORY_FILE_PATH="+e.memory)+`, `+q(e.mark)+`]
    manifest: `+q(filepath.Join(manifests, "memory.axag.json"))+`
    # Once killed, it stays down for the rest of the test.
    restart_backoff_min: 1h
    restart_backoff_max: 1h
  - name: notes
    url: `+q(e.r.upURL)+`
    manifest: `+q(filepath.Join(manifests, "notes.axag.json"))+`
    credentials:
      # The gateway's own session (its pins at start): its service user.
      client_credentials: {token_url: `+tokenURL+`, client_id: sid1, client_secret_file: `+q(file("sid1-secret", "verysecret"))+`}
      token_exchange: {token_url: `+tokenURL+`, client_id: `+gatewayClient+`, client_secret_file: `+q(file("gateway-secret", gatewaySecret))+`, audience: `+q(upstreamAud)+`}
`)
	cmd := exec.Command(bin, "mcp", "--config", config, "--listen", "127.0.0.1:0",
		"--jwks", file("jwks.json", string(jwks)), "--issuer", "https://id.example.com", "--audience", gatewayAud)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := &stderrLines{want: "axgate mcp: listening", seen: make(chan string, 1)}
	all := &stderrLines{seen: make(chan string)}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(io.MultiWriter(e.stderr, listening, all), stderr)
	}()
	t.Cleanup(func() {
		// SIGTERM: axgate mcp stops its children and exits.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-copied:
		case <-time.After(time.Minute): // a bound, not a pause
			_ = cmd.Process.Kill()
			<-copied
		}
		_ = cmd.Wait()
	})
	select {
	case line := <-listening.seen:
		m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("axgate mcp's listening line names no address: %s", line)
		}
		return &front{url: m[1], log: all}
	case <-copied:
		t.Fatalf("axgate mcp exited:\n%s", all)
	case <-time.After(2 * time.Minute):
		t.Fatalf("axgate mcp did not listen in two minutes:\n%s", all)
	}
	return nil
}

// buildAxgate builds cmd/axgate (of this workspace) into the test's folder.
func buildAxgate(t *testing.T) string {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("end-to-end test skipped: no go command to build cmd/axgate")
	}
	bin := filepath.Join(t.TempDir(), "axgate")
	cmd := exec.Command(gotool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "..", "cmd", "axgate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/axgate: %v\n%s", err, out)
	}
	return bin
}
