package browsertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/axgate/axgate/middleware"
)

// gatewayPeople are the people of the end-to-end test, all of tenant acme:
// alice asks (her agent's bearer token and her sign-in are the same person)
// and is an admin too, so that only the requester rule keeps her from
// approving her own call; bob and dave are the two approvers. Their IDs end
// in run, so that runs sharing a Redis database keep apart (a caller's
// pending requests count against a quota there for a day).
func gatewayPeople(run string) map[string]middleware.Principal {
	return map[string]middleware.Principal{
		"alice": {ID: "alice-" + run, Tenant: "acme", Roles: []string{"editor", "admin"}},
		"bob":   {ID: "bob-" + run, Tenant: "acme", Roles: []string{"admin"}},
		"dave":  {ID: "dave-" + run, Tenant: "acme", Roles: []string{"admin"}},
	}
}

// exampleDir is the example whose package.json pins the TypeScript clients
// and server-filesystem.
var exampleDir = filepath.Join("..", "..", "..", "examples", "mcpgateway")

// TestEndToEndThroughAxgateMCP is issue 30's "done when", with every part
// real: the axgate binary (built from cmd/axgate) runs "axgate mcp" in front
// of @modelcontextprotocol/server-filesystem with its pages for people
// (--human, signing in at oauth2-proxy/mockoidc); agents on the official
// TypeScript SDKs (@modelcontextprotocol/client 2.4.0 and
// @modelcontextprotocol/sdk 1.32.2) call write_file and move_file; people
// decide in Debian's Chromium, each in a browser context of their own.
//
//   - write_file (the person confirms), each client declaring URL-mode
//     elicitation: sent to the page of the call, where alice signs in and
//     sees the exact path and content, and confirms; the call goes on and
//     writes the file; the same call again does not; a denial writes nothing.
//   - move_file (alice confirms, then a 2-of-2 approval:
//     testdata/mcpgateway.axag.json), a client without elicitation: each
//     refusal names its page; alice confirms, bob approves, alice (the
//     requester, an admin too) is not offered to approve and her browser's
//     posted Approve is refused (403), dave approves, and the repeat moves
//     the file once; bob's denial vetoes another move.
//   - With AXGATE_REDIS_URL (database 12), a second replica sharing Redis:
//     refused on A, confirmed on A's page, the repeat on replica B writes
//     the file, once.
func TestEndToEndThroughAxgateMCP(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("end-to-end test skipped: no " + chromium + " (apt-get install -y chromium)")
	}
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode: it builds axgate and installs the TypeScript SDKs with npm")
	}
	node, modules := installExample(t)
	bin := buildAxgate(t)
	work := t.TempDir()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// Keys and the agents' bearer tokens, by the binary's own commands.
	keys := filepath.Join(work, "keys")
	run(t, bin, "keys", "gen", "--alg", "ES256", "--out", keys)
	cast := gatewayPeople(strings.ToLower(rand.Text()[:8]))
	bearer := func(who string) string {
		p := cast[who]
		return strings.TrimSpace(run(t, bin, "token", "principal", "--key", filepath.Join(keys, "signing-key.pem"),
			"--sub", p.ID, "--tenant", p.Tenant, "--roles", strings.Join(p.Roles, ","), "--aud", "axgate-agents", "--ttl", "1h"))
	}
	aliceAgent := bearer("alice")

	op, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Shutdown() })
	secret := filepath.Join(work, "oidc-secret")
	if err := os.WriteFile(secret, []byte(op.Config().ClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	program := filepath.Join(modules, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	args := []string{"mcp", "--listen", "127.0.0.1:0", "--human", "127.0.0.1:0",
		"--manifest", filepath.Join("testdata", "mcpgateway.axag.json"),
		"--upstream-command", node + " " + program + " " + root,
		"--jwks", filepath.Join(keys, "jwks.json"), "--audience", "axgate-agents",
		"--signing-key", filepath.Join(keys, "signing-key.pem"),
		"--oidc-issuer", op.Issuer(), "--oidc-client-id", op.Config().ClientID, "--oidc-client-secret-file", secret}
	redisURL := redisDB12()
	if redisURL != "" {
		args = append(args, "--redis", redisURL)
	}
	a := startAxgate(t, bin, args...)
	ag := startAgent(t, node, modules)
	browser := startChromium(t)
	people := map[string]context.Context{}
	for who := range cast {
		ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		people[who] = ctx
	}
	b := &pageBrowser{t: t, op: op, people: people, cast: cast}

	// The 2.x client asks for the stateless protocol (input_required with
	// the page, requestState on the retry), the 1.x client for sessions
	// (URL-mode elicitation/create): each must get the one it asked for.
	for _, sdk := range []struct{ name, kind, version string }{{"client 2.4.0", "client", "2026-07-28"}, {"sdk 1.32.2", "sdk", "2025-11-25"}} {
		t.Run("confirm on the page/"+sdk.name, func(t *testing.T) {
			id := "url-" + sdk.kind
			version := ag.connect(t, id, sdk.kind, a.mcp, aliceAgent, true)
			if version != sdk.version {
				t.Fatalf("%s negotiated MCP %s with axgate mcp, want %s", sdk.name, version, sdk.version)
			}
			file := filepath.Join(root, sdk.kind+".txt")
			write := map[string]any{"path": file, "content": "written by " + sdk.name + " once alice confirmed <b>on the page</b>"}

			var pages []string
			res := ag.call(t, id, "write_file", write, func(page string) {
				pages = append(pages, page)
				if !strings.HasPrefix(page, a.human+"/requests/") {
					t.Errorf("sent to %q, not a page of %s", page, a.human)
				}
				if _, err := os.Stat(file); err == nil {
					t.Error("the file was written before the person confirmed")
				}
				b.visit("alice", page)
				shown := b.text("alice", "#arguments")
				for _, v := range write {
					if q := jsonText(v); !strings.Contains(shown, q) {
						t.Errorf("the page does not show %s exactly:\n%s", q, shown)
					}
				}
				b.click("alice", "#confirm")
				if got := b.text("alice", "#state"); got != "confirmed" {
					t.Errorf("after confirming: state %q", got)
				}
			})
			if res.IsError || len(pages) != 1 {
				t.Fatalf("the confirmed write: %+v, sent to %q", res, pages)
			}
			if got, err := os.ReadFile(file); err != nil || string(got) != write["content"] {
				t.Fatalf("the file holds %q (%v)", got, err)
			}

			// The decision was for one call: the same call again is refused
			// while nobody decides again.
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			again := ag.call(t, id, "write_file", write, func(string) {})
			again.refused(t, "AXAG_CONFIRMATION_MISSING")
			if _, err := os.Stat(file); err == nil {
				t.Fatal("a second retry wrote the file")
			}

			// Deny: nothing is written.
			denied := map[string]any{"path": filepath.Join(root, sdk.kind+"-denied.txt"), "content": "denied"}
			no := ag.call(t, id, "write_file", denied, func(page string) {
				b.visit("alice", page)
				b.click("alice", "#deny")
				if got := b.text("alice", "#state"); got != "denied" {
					t.Errorf("after denying: state %q", got)
				}
			})
			if no.refused(t, "AXAG_CONFIRMATION_MISSING")["reason"] != "declined" {
				t.Errorf("the denied write: %+v", no)
			}
			if _, err := os.Stat(denied["path"].(string)); err == nil {
				t.Fatal("a denied write wrote the file")
			}
		})
	}

	t.Run("two of two approve, a denial vetoes", func(t *testing.T) {
		ag.connect(t, "plain", "sdk", a.mcp, aliceAgent, false)
		// confirmed is the page of the move's approval, once alice
		// confirmed the move on the page its first refusal names.
		confirmed := func(move map[string]any) string {
			t.Helper()
			b.visit("alice", ag.call(t, "plain", "move_file", move, nil).page(t, "AXAG_CONFIRMATION_MISSING", a.human))
			b.click("alice", "#confirm")
			return ag.call(t, "plain", "move_file", move, nil).page(t, "AXAG_APPROVAL_MISSING", a.human)
		}
		src, dst := filepath.Join(root, "draft.txt"), filepath.Join(root, "final.txt")
		if err := os.WriteFile(src, []byte("draft"), 0o600); err != nil {
			t.Fatal(err)
		}
		move := map[string]any{"source": src, "destination": dst}
		page := confirmed(move)

		b.visit("bob", page)
		if got := b.text("bob", "#requester"); got != cast["alice"].ID {
			t.Fatalf("bob's page names %q as the requester", got)
		}
		b.click("bob", "#approve")
		if got := b.text("bob", "#progress"); !strings.HasPrefix(got, "1 of 2") {
			t.Fatalf("after bob: progress %q", got)
		}
		// alice is an admin too, and may not approve her own call.
		b.visit("alice", page)
		if b.has("alice", "#approve") || !strings.Contains(b.text("alice", "#note"), "your own call") {
			t.Fatalf("the requester is offered to approve her own call:\n%s", b.text("alice", "main"))
		}
		// Nor when her browser posts an Approve the page does not offer
		// (same origin, her session's CSRF token): refused.
		if got := b.forge("alice", "approve"); !strings.Contains(got, "someone else must approve it") {
			t.Fatalf("the requester's own approval, posted: %s", got)
		}
		if ag.call(t, "plain", "move_file", move, nil).refused(t, "AXAG_APPROVAL_MISSING"); fileExists(dst) {
			t.Fatal("moved with one approval of two")
		}
		b.visit("dave", page)
		b.click("dave", "#approve")
		if got := b.text("dave", "#state"); got != "approved" {
			t.Fatalf("after dave: state %q", got)
		}
		if d := b.text("dave", "#decisions"); !strings.Contains(d, cast["bob"].ID) || !strings.Contains(d, cast["dave"].ID) {
			t.Fatalf("who decided: %q", d)
		}
		if res := ag.call(t, "plain", "move_file", move, nil); res.IsError || !fileExists(dst) || fileExists(src) {
			t.Fatalf("the repeat after two approvals: %+v", res)
		}
		// Once: with the source back, the same call again is refused by
		// the gates, and nothing moves.
		if err := os.WriteFile(src, []byte("draft again"), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := ag.call(t, "plain", "move_file", move, nil); !res.IsError || !strings.HasPrefix(res.StructuredContent.Error.Code, "AXAG_") {
			t.Fatalf("a second repeat: %+v", res)
		}
		if got, _ := os.ReadFile(dst); string(got) != "draft" {
			t.Fatalf("a second repeat moved again: %q", got)
		}

		// A denial vetoes.
		src2, dst2 := filepath.Join(root, "keep.txt"), filepath.Join(root, "gone.txt")
		if err := os.WriteFile(src2, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		veto := map[string]any{"source": src2, "destination": dst2}
		page = confirmed(veto)
		b.visit("bob", page)
		b.click("bob", "#deny")
		b.visit("dave", page)
		if b.has("dave", "#approve") || b.text("dave", "#state") != "denied" {
			t.Fatalf("dave may approve a vetoed call:\n%s", b.text("dave", "main"))
		}
		if d := ag.call(t, "plain", "move_file", veto, nil).refused(t, "AXAG_APPROVAL_INVALID"); d["reason"] != "approval_denied" {
			t.Errorf("the vetoed call's refusal: %v", d)
		}
		if fileExists(dst2) || !fileExists(src2) {
			t.Fatal("a vetoed move moved the file")
		}
	})

	t.Run("the repeat on a second replica sharing Redis", func(t *testing.T) {
		if redisURL == "" {
			t.Skip("no Redis: set AXGATE_REDIS_URL for the second replica (database 12)")
		}
		rb := startAxgate(t, bin, args...)
		ag.connect(t, "onA", "sdk", a.mcp, aliceAgent, false)
		ag.connect(t, "onB", "client", rb.mcp, aliceAgent, false)
		file := filepath.Join(root, "replica.txt")
		write := map[string]any{"path": file, "content": "confirmed on A's page, written through B"}
		page := ag.call(t, "onA", "write_file", write, nil).page(t, "AXAG_CONFIRMATION_MISSING", a.human)
		b.visit("alice", page)
		b.click("alice", "#confirm")
		if res := ag.call(t, "onB", "write_file", write, nil); res.IsError || !fileExists(file) {
			t.Fatalf("the repeat on replica B: %+v", res)
		}
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"onB", "onA"} {
			ag.call(t, id, "write_file", write, nil).refused(t, "AXAG_CONFIRMATION_MISSING")
		}
		if fileExists(file) {
			t.Fatal("a further repeat wrote the file again")
		}
	})
}

// jsonText is v as JSON, unescaped for HTML: as the page shows a string
// argument.
func jsonText(v any) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// redisDB12 is AXGATE_REDIS_URL with database 12, or "" without it.
func redisDB12() string {
	s := os.Getenv("AXGATE_REDIS_URL")
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	u.Path = "/12"
	return u.String()
}

// run runs the axgate binary and returns its standard output.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("axgate %s: %v\n%s", strings.Join(args[:2], " "), err, stderr.String())
	}
	return string(out)
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

// installExample is examples/mcpgateway's node_modules (npm ci, once per
// lockfile, in the user's cache: the gateway's tests share it), or the
// folder AXGATE_MCPGATEWAY_NODE_DIR names; it skips without node or npm.
func installExample(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("end-to-end test skipped: node is not installed (the TypeScript SDK clients and server-filesystem need it)")
	}
	if d := os.Getenv("AXGATE_MCPGATEWAY_NODE_DIR"); d != "" {
		return node, d
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("end-to-end test skipped: npm is not installed (to install the TypeScript SDK clients)")
	}
	h := sha256.New()
	files := map[string][]byte{}
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(exampleDir, f))
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
	final := filepath.Join(parent, fmt.Sprintf("mcpgateway-%x", h.Sum(nil)[:8]))
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
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of examples/mcpgateway: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil && !installed() {
		t.Fatal(err)
	}
	return node, final
}

// axgateProcess is one "axgate mcp" replica: its /mcp URL and the base URL
// of its pages (no trailing slash).
type axgateProcess struct {
	mcp, human string
}

// startAxgate runs the binary with args and waits for the lines that say it
// serves the pages and listens.
func startAxgate(t *testing.T, bin string, args ...string) axgateProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := regexp.MustCompile(`addr=(\S+)`)
	var g axgateProcess
	var log strings.Builder
	lines := bufio.NewScanner(stderr)
	for g.mcp == "" && lines.Scan() {
		line := lines.Text()
		log.WriteString(line + "\n")
		m := addr.FindStringSubmatch(line)
		switch {
		case m == nil:
		case strings.Contains(line, "people confirm and approve at"):
			g.human = m[1]
		case strings.Contains(line, "axgate mcp: listening"):
			g.mcp = m[1]
		}
	}
	if g.mcp == "" || g.human == "" {
		t.Fatalf("axgate mcp did not start:\n%s", log.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return g
}

// agent is testdata/agent.mjs running beside the example's node_modules:
// TypeScript SDK clients the test drives with JSON lines.
type agent struct {
	in     io.Writer
	mu     sync.Mutex
	events map[string]chan agentEvent
	exited chan struct{}
	stderr *strings.Builder
}

type agentEvent struct {
	Ev            string       `json:"ev"`
	ID            string       `json:"id"`
	Version       string       `json:"version"`
	URL           string       `json:"url"`
	ElicitationID string       `json:"elicitationId"`
	Message       string       `json:"message"`
	Result        *toolOutcome `json:"result"`
}

// toolOutcome is a tool call's result as the client got it.
type toolOutcome struct {
	IsError           bool `json:"isError"`
	StructuredContent struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	} `json:"structuredContent"`
	Content []map[string]any `json:"content"`
}

// refused fails unless the outcome is a refusal with code: its details.
func (r *toolOutcome) refused(t *testing.T, code string) map[string]any {
	t.Helper()
	if !r.IsError || r.StructuredContent.Error.Code != code {
		t.Fatalf("want a refusal %s, got %+v", code, r)
	}
	return r.StructuredContent.Error.Details
}

// page fails unless the outcome is a refusal with code naming a page of
// human: the page's URL.
func (r *toolOutcome) page(t *testing.T, code, human string) string {
	t.Helper()
	d := r.refused(t, code)
	u, _ := d["decision_url"].(string)
	if !strings.HasPrefix(u, human+"/requests/") || d["agent_action"] == nil {
		t.Fatalf("the refusal does not name the page of %s: %v", human, d)
	}
	return u
}

func startAgent(t *testing.T, node, modules string) *agent {
	t.Helper()
	// A folder of its own whose node_modules is the example's.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(modules, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "agent.mjs")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ag := &agent{in: in, events: map[string]chan agentEvent{}, exited: make(chan struct{}), stderr: &strings.Builder{}}
	cmd.Stderr = ag.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(ag.exited)
		lines := bufio.NewScanner(out)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var ev agentEvent
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				continue
			}
			ag.channel(ev.ID) <- ev
		}
	}()
	t.Cleanup(func() {
		in.Close()
		<-ag.exited
		_ = cmd.Wait()
	})
	return ag
}

func (ag *agent) channel(id string) chan agentEvent {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	c, ok := ag.events[id]
	if !ok {
		c = make(chan agentEvent, 16)
		ag.events[id] = c
	}
	return c
}

func (ag *agent) send(t *testing.T, cmd map[string]any) {
	t.Helper()
	line, _ := json.Marshal(cmd)
	if _, err := ag.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("the agent: %v", err)
	}
}

// next is the next event of client id (at most a minute: a bound, not a
// pause).
func (ag *agent) next(t *testing.T, id string) agentEvent {
	t.Helper()
	select {
	case ev := <-ag.channel(id):
		if ev.Ev == "error" {
			t.Fatalf("the agent (%s): %s", id, ev.Message)
		}
		return ev
	case <-ag.exited:
		t.Fatalf("the agent exited:\n%s", ag.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("no answer from the agent (%s) in a minute", id)
	}
	return agentEvent{}
}

// connect connects client id (kind "client" or "sdk") to mcpURL with the
// bearer token; urlElicitation declares URL-mode elicitation. It returns
// the protocol version negotiated.
func (ag *agent) connect(t *testing.T, id, kind, mcpURL, bearer string, urlElicitation bool) string {
	t.Helper()
	ag.send(t, map[string]any{"op": "connect", "id": id, "sdk": kind, "url": mcpURL, "bearer": bearer, "urlElicitation": urlElicitation})
	ev := ag.next(t, id)
	if ev.Ev != "connected" {
		t.Fatalf("connecting %s: %+v", id, ev)
	}
	return ev.Version
}

// call calls tool with args on client id. Each URL-mode request on the way
// is given to atPage (the person at the page), then accepted; without
// atPage, a URL-mode request fails the test.
func (ag *agent) call(t *testing.T, id, tool string, args map[string]any, atPage func(page string)) *toolOutcome {
	t.Helper()
	ag.send(t, map[string]any{"op": "call", "id": id, "tool": tool, "args": args})
	for {
		ev := ag.next(t, id)
		switch ev.Ev {
		case "result":
			return ev.Result
		case "elicit":
			if atPage == nil {
				t.Fatalf("%s was sent to %s, a client without elicitation", id, ev.URL)
			}
			atPage(ev.URL)
			ag.send(t, map[string]any{"op": "answer", "id": id, "action": "accept"})
		default:
			t.Fatalf("%s: unexpected %+v", id, ev)
		}
	}
}

// pageBrowser is the people's browser contexts and the provider they sign
// in at.
type pageBrowser struct {
	t      *testing.T
	op     *mockoidc.MockOIDC
	people map[string]context.Context
	cast   map[string]middleware.Principal
}

// visit opens page as who, signing in at the provider when the pages ask.
func (b *pageBrowser) visit(who, page string) {
	b.t.Helper()
	signInNext(b.op, b.cast[who])
	b.within(who, "opening "+page, func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("main")))
	})
}

// within runs a step of who's browser, failing the test saying where when
// it has not completed in 90 s, instead of waiting for the test binary's
// timeout. (The step runs on the tab's own context: a context derived from
// it with a deadline would, on a tab's first step, bind the tab's life to
// that deadline.)
func (b *pageBrowser) within(who, what string, step func(ctx context.Context) error) {
	b.t.Helper()
	done := make(chan error, 1)
	go func() { done <- step(b.people[who]) }()
	select {
	case err := <-done:
		if err != nil {
			b.t.Fatalf("%s %s: %v (the browser shows %s)", who, what, err, b.location(who))
		}
	case <-time.After(90 * time.Second):
		b.t.Fatalf("%s %s: not done in 90 s (the browser shows %s)", who, what, b.location(who))
	}
}

// location is the URL and text who's browser shows, for a failure's
// message.
func (b *pageBrowser) location(who string) string {
	shown := make(chan string, 1)
	go func() {
		ctx := b.people[who]
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			shown <- "(unknown: " + err.Error() + ")"
			return
		}
		body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if err != nil {
			body = "(unknown: " + err.Error() + ")"
		}
		shown <- loc + ":\n" + body
	}()
	select {
	case s := <-shown:
		return s
	case <-time.After(5 * time.Second):
		return "(unknown: the browser does not answer)"
	}
}

func (b *pageBrowser) text(who, sel string) string {
	b.t.Helper()
	var s string
	b.within(who, "reading "+sel, func(ctx context.Context) (err error) {
		s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		return err
	})
	return s
}

func (b *pageBrowser) has(who, sel string) bool {
	b.t.Helper()
	var n int
	b.within(who, "looking for "+sel, func(ctx context.Context) error {
		ids, err := chromedp.Run(ctx, chromedp.QueryNodeIDs(chromedp.CSS(sel), chromedp.AtLeast(0)))
		n = len(ids)
		return err
	})
	return n > 0
}

// forge makes who's browser post decision for the request of the page it
// shows, with the session's CSRF token (of the sign-out form), a form the
// page does not offer; it returns the text of the answer.
func (b *pageBrowser) forge(who, decision string) string {
	b.t.Helper()
	// DevTools evaluates the script: the page's CSP forbids its own.
	js := fmt.Sprintf(`(() => {
		const f = document.createElement('form');
		f.method = 'post';
		f.action = location.pathname;
		for (const [k, v] of [['decision', %q], ['csrf', document.querySelector('input[name=csrf]').value]]) {
			const i = document.createElement('input');
			i.type = 'hidden'; i.name = k; i.value = v;
			f.appendChild(i);
		}
		document.body.appendChild(f);
		f.submit();
		return true;
	})()`, decision)
	b.within(who, "posting "+decision, func(ctx context.Context) error {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		return err
	})
	b.within(who, "waiting for the answer to "+decision, func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS("#state")), chromedp.WaitVisible(chromedp.CSS("main")))
	})
	return b.text(who, "main")
}

// click presses the decision button sel and waits for the page it leads to
// (where the decision is made: no button sel, the state shown).
func (b *pageBrowser) click(who, sel string) {
	b.t.Helper()
	b.within(who, "clicking "+sel, func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitNotPresent(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS("#state")))
	})
}
