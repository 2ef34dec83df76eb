package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/axgate/axgate/middleware"
)

// fakeUpstream is a tool server that records the calls it gets.
type fakeUpstream struct {
	mu    sync.Mutex
	calls []upstreamCall
	// answer overrides the reply of a tool: status and body.
	answer map[string]func() (int, string)
}

type upstreamCall struct {
	Tool      string
	Args      map[string]any
	Principal string
}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/tools/")
	name, ok2 := strings.CutSuffix(name, "/call")
	if !ok || !ok2 || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var args map[string]any
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.calls = append(u.calls, upstreamCall{Tool: name, Args: args, Principal: r.Header.Get("X-Axgate-Principal")})
	answer := u.answer[name]
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if answer != nil {
		status, body := answer()
		w.WriteHeader(status)
		io.WriteString(w, body)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"ok": true, "tool": name}})
}

func (u *fakeUpstream) called() []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamCall(nil), u.calls...)
}

// servePKI makes a key pair and the tokens the serve tests use.
type servePKI struct {
	key, jwks, bearer string
}

func newServePKI(t *testing.T) servePKI {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, code := cli(t, nil, "keys", "gen", "--out", dir); code != exitOK {
		t.Fatal(stderr)
	}
	p := servePKI{key: filepath.Join(dir, privateKeyFile), jwks: filepath.Join(dir, publicJWKSFile)}
	p.bearer = mint(t, "principal", "--key", p.key, "--sub", "alice", "--tenant", "acme", "--roles", "buyer")
	return p
}

func (p servePKI) confirmation(t *testing.T, intent, args string) string {
	return mint(t, "confirmation", "--key", p.key, "--sub", "alice", "--tenant", "acme", "--intent", intent, "--args", args)
}

// post sends a call and returns the status and the decoded body.
func post(t *testing.T, base, path, bearer, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s %s: %d, body is not JSON: %s", req.Method, req.URL, resp.StatusCode, data)
	}
	return resp.StatusCode, v
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errorDetails(body map[string]any) map[string]any {
	e, _ := body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

func toolNames(t *testing.T, base string) []string {
	t.Helper()
	status, body := get(t, base+"/tools")
	if status != http.StatusOK {
		t.Fatalf("GET /tools: %d %v", status, body)
	}
	var names []string
	for _, tl := range body["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return names
}

// driveShop runs the refusals and successes every gateway test checks.
func driveShop(t *testing.T, base string, pki servePKI, up *fakeUpstream) {
	t.Helper()
	before := len(up.called())
	refusals := []struct {
		name, path, bearer, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"no bearer token", "/tools/cart_add_item/call", "", `{"product_id":"p-1","quantity":1}`, nil, 401, "AXGATE_UNAUTHENTICATED"},
		{"forged bearer token", "/tools/cart_add_item/call", pki.bearer + "x", `{"product_id":"p-1","quantity":1}`, nil, 401, "AXGATE_UNAUTHENTICATED"},
		{"out of range", "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":50}`, nil, 400, "AXAG_OUT_OF_RANGE"},
		{"missing parameter", "/tools/cart_add_item/call", pki.bearer, `{"quantity":1}`, nil, 400, "AXAG_MISSING_PARAM"},
		{"unknown tool", "/tools/cart_empty/call", pki.bearer, `{}`, nil, 404, "AXAG_INTENT_NOT_FOUND"},
		{"precondition", "/tools/order_place/call", pki.bearer, `{"cart_id":""}`, nil, 412, "AXAG_PRECONDITION_FAILED"},
		{"confirmation missing", "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`, nil, 428, "AXAG_CONFIRMATION_MISSING"},
		{"confirmation for other arguments", "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`,
			[]string{"X-AXAG-Confirmation", pki.confirmation(t, "order.place", `{"cart_id":"c-2"}`)}, 0, ""},
	}
	for _, r := range refusals {
		status, body := post(t, base, r.path, r.bearer, r.body, r.header...)
		if status < 400 || (r.status != 0 && status != r.status) || (r.code != "" && errorCode(body) != r.code) {
			t.Errorf("%s: %d %v, want %d %s", r.name, status, body, r.status, r.code)
		}
	}
	// The refusal tells the agent what to ask the person.
	_, body := post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`)
	e, _ := body["error"].(map[string]any)
	if d, _ := e["details"].(map[string]any); d["confirmation_message"] != "Place the order for cart c-1?" {
		t.Errorf("confirmation refusal details: %v", body)
	}
	if n := len(up.called()); n != before {
		t.Fatalf("refused calls reached the upstream: %v", up.called()[before:])
	}

	status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":2}`)
	if result, _ := body["result"].(map[string]any); status != http.StatusOK || result["tool"] != "cart_add_item" {
		t.Fatalf("allowed call: %d %v", status, body)
	}
	conf := pki.confirmation(t, "order.place", `{"cart_id":"c-1"}`)
	status, body = post(t, base, "/tools/order_place/call", pki.bearer, `{ "cart_id" : "c-1" }`, "X-AXAG-Confirmation", conf)
	if status != http.StatusOK {
		t.Fatalf("confirmed call: %d %v", status, body)
	}
	// A confirmation is single-use.
	status, body = post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`, "X-AXAG-Confirmation", conf)
	if status < 400 {
		t.Errorf("a confirmation token was used twice: %d %v", status, body)
	}
	calls := up.called()[before:]
	if len(calls) != 2 || calls[0].Tool != "cart_add_item" || calls[0].Args["quantity"] != 2.0 || calls[0].Principal != "alice" || calls[1].Tool != "order_place" {
		t.Errorf("upstream got %+v", calls)
	}
}

// TestServeInProcess drives the gateway's handler directly: refusals,
// successes, upstream failures and reloads without signals.
func TestServeInProcess(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := &fakeUpstream{answer: map[string]func() (int, string){}}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	dir := t.TempDir()
	mpath := filepath.Join(dir, "manifest.json")
	copyFile(t, filepath.Join("testdata", "serve", "shop.json"), mpath)

	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))
	u, _ := url.Parse(upSrv.URL)
	gw, err := newGateway(context.Background(), serveConfig{
		manifest: mpath,
		enforcerConfig: enforcerConfig{jwks: pki.jwks, issuer: "axgate", audience: "axgate",
			preconditions: conditionFlags{`cart is not empty=args.cart_id != ""`}},
		upstreamTimeout: 5 * time.Second,
	}, u, log)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.close()
	srv := httptest.NewServer(gw)
	defer srv.Close()

	driveShop(t, srv.URL, pki, up)

	if status, body := get(t, srv.URL+"/healthz"); status != 200 || body["status"] != "ok" || body["tools"] != 2.0 {
		t.Errorf("healthz: %d %v", status, body)
	}

	t.Run("upstream failures", func(t *testing.T) {
		up.mu.Lock()
		up.answer["cart_add_item"] = func() (int, string) { return 500, `{"secret":"stack trace"}` }
		up.mu.Unlock()
		status, body := post(t, srv.URL, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-2","quantity":1}`)
		if status != 502 || errorCode(body) != "AXGATE_TOOL_FAILED" || strings.Contains(toJSON(body), "stack trace") {
			t.Errorf("upstream 500: %d %v", status, body)
		}
		up.mu.Lock()
		up.answer["cart_add_item"] = func() (int, string) {
			return 409, `{"error":{"code":"AXGATE_DUPLICATE_CALL","message":"already added","details":{"reason":"duplicate"}}}`
		}
		up.mu.Unlock()
		status, body = post(t, srv.URL, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-3","quantity":1}`)
		if status != 409 || errorCode(body) != "AXGATE_DUPLICATE_CALL" {
			t.Errorf("upstream AXAG refusal not relayed: %d %v", status, body)
		}
		up.mu.Lock()
		up.answer["cart_add_item"] = func() (int, string) { return 200, `{"no_result":1}` }
		up.mu.Unlock()
		if status, body := post(t, srv.URL, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-4","quantity":1}`); status != 502 {
			t.Errorf("malformed upstream answer: %d %v", status, body)
		}
		up.mu.Lock()
		delete(up.answer, "cart_add_item")
		up.mu.Unlock()
	})

	t.Run("reload", func(t *testing.T) {
		copyFile(t, filepath.Join("testdata", "serve", "shop-v2.json"), mpath)
		gw.reload(context.Background())
		if names := toolNames(t, srv.URL); strings.Join(names, ",") != "cart_add_item,order_place,cart_clear" {
			t.Fatalf("after a good reload: %v", names)
		}
		copyFile(t, filepath.Join("testdata", "serve", "broken.json"), mpath)
		gw.reload(context.Background())
		if names := toolNames(t, srv.URL); len(names) != 3 {
			t.Fatalf("a broken manifest replaced the good one: %v", names)
		}
		logMu.Lock()
		out := logs.String()
		logMu.Unlock()
		if !strings.Contains(out, "reload failed") || !strings.Contains(out, "/actions/0/risk_level") {
			t.Errorf("the log does not say why the reload failed:\n%s", out)
		}
		if status, body := post(t, srv.URL, "/tools/cart_clear/call", pki.bearer, `{}`); status != 200 {
			t.Errorf("call after the failed reload: %d %v", status, body)
		}
	})
}

func TestServeUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--manifest", "m.json"}, "--upstream is required"},
		{[]string{"serve", "--manifest", "m.json", "--upstream", "http://x"}, "callers must be authenticated"},
		{[]string{"serve", "--manifest", "m.json", "--upstream", "ftp://x", "--anonymous"}, "http or https URL"},
		{[]string{"serve", "--manifest", "m.json", "--upstream", "http://x", "--jwks", "a", "--jwks-url", "http://b"}, "not both"},
		{[]string{"serve", "--manifest", "m.json", "--upstream", "http://x", "--anonymous", "--precondition", "nothing"}, "NAME=CEL"},
	}
	for _, c := range cases {
		if _, stderr, code := cli(t, nil, c.args...); code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
	// A manifest that does not load is a failure, not a usage error.
	_, stderr, code := cli(t, nil, "serve", "--manifest", filepath.Join("testdata", "serve", "broken.json"), "--upstream", "http://127.0.0.1:1", "--anonymous")
	if code != exitFail || !strings.Contains(stderr, "risk_level") {
		t.Errorf("broken manifest: exit %d %s", code, stderr)
	}
}

// TestServeBinary builds axgate, runs "axgate serve" in front of an upstream,
// drives a refusal and a success through it, reloads the manifest with
// SIGHUP (a good one, then a broken one) and stops it with SIGTERM.
func TestServeBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "axgate")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pki := newServePKI(t)
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	mpath := filepath.Join(t.TempDir(), "manifest.json")
	copyFile(t, filepath.Join("testdata", "serve", "shop.json"), mpath)

	cmd := exec.Command(bin, "serve", "--manifest", mpath, "--upstream", upSrv.URL, "--listen", "127.0.0.1:0",
		"--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`)
	// An io.Pipe, not StderrPipe: Wait then returns only after everything
	// the process wrote was handed to the watcher, so the last log line
	// ("stopped") cannot be lost when the pipe closes.
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	log := newLineWatcher(stderr)
	go func() { exited <- cmd.Wait() }()

	line := log.waitFor(t, "listening")
	m := regexp.MustCompile(`addr=(http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %q", line)
	}
	base := m[1]

	if status, body := get(t, base+"/healthz"); status != 200 || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", status, body)
	}
	driveShop(t, base, pki, up)
	conf := pki.confirmation(t, "order.place", `{"cart_id":"c-7"}`)
	if status, body := post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-7"}`, "X-AXAG-Confirmation", conf); status != 200 {
		t.Fatalf("confirmed call: %d %v", status, body)
	}

	copyFile(t, filepath.Join("testdata", "serve", "shop-v2.json"), mpath)
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "manifest reloaded")
	if names := toolNames(t, base); strings.Join(names, ",") != "cart_add_item,order_place,cart_clear" {
		t.Fatalf("after SIGHUP with a good manifest: %v", names)
	}
	// The reload kept the used token ids (in memory: no --redis).
	if status, body := post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-7"}`, "X-AXAG-Confirmation", conf); status != http.StatusPreconditionRequired || errorDetails(body)["reason"] != "already_used" {
		t.Errorf("a confirmation token used before SIGHUP, again after it: %d %v, want 428 with reason already_used", status, body)
	}

	copyFile(t, filepath.Join("testdata", "serve", "broken.json"), mpath)
	cmd.Process.Signal(syscall.SIGHUP)
	if line := log.waitFor(t, "reload failed"); !strings.Contains(line, "risk_level") {
		t.Errorf("the log does not say why: %s", line)
	}
	if names := toolNames(t, base); len(names) != 3 {
		t.Fatalf("after SIGHUP with a broken manifest: %v", names)
	}
	if status, body := post(t, base, "/tools/cart_clear/call", pki.bearer, `{}`); status != 200 {
		t.Errorf("call after the failed reload: %d %v", status, body)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("axgate serve did not exit cleanly on SIGTERM: %v\n%s", err, log.all())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("axgate serve did not stop on SIGTERM\n%s", log.all())
	}
	stderrW.Close()
	log.waitFor(t, "stopped") // the graceful shutdown's last line
}

// lineWatcher collects a process's log lines.
type lineWatcher struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func newLineWatcher(r io.Reader) *lineWatcher {
	w := &lineWatcher{more: make(chan struct{}, 1)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, s.Text())
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// waitFor returns the first line not yet returned that contains s. The
// deadline only bounds a hung process; nothing is asserted about timing.
func (w *lineWatcher) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		for i, l := range w.lines {
			if strings.Contains(l, s) {
				w.lines[i] = "(seen) " + l
				w.mu.Unlock()
				return l
			}
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-deadline:
			t.Fatalf("no log line with %q:\n%s", s, w.all())
		}
	}
}

func (w *lineWatcher) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// newShopGateway serves testdata/serve/shop.json (copied, so that a test can
// rewrite it and reload) in front of up, in process.
func newShopGateway(t *testing.T, c serveConfig, up http.Handler) (gw *gateway, base, mpath string) {
	t.Helper()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	mpath = filepath.Join(t.TempDir(), "manifest.json")
	copyFile(t, filepath.Join("testdata", "serve", "shop.json"), mpath)
	c.manifest, c.issuer, c.audience = mpath, "axgate", "axgate"
	c.preconditions = conditionFlags{`cart is not empty=args.cart_id != ""`}
	c.upstreamTimeout = 5 * time.Second
	u, _ := url.Parse(upSrv.URL)
	gw, err := newGateway(context.Background(), c, u, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.close)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return gw, srv.URL, mpath
}

// TestServeReloadKeepsState: without --redis, the state the gates keep is
// in memory, and a reload must not wipe it — else a confirmation token could
// be used once per SIGHUP.
func TestServeReloadKeepsState(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := &fakeUpstream{}
	gw, base, mpath := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{jwks: pki.jwks}}, up)

	conf := pki.confirmation(t, "order.place", `{"cart_id":"c-1"}`)
	if status, body := post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`, "X-AXAG-Confirmation", conf); status != 200 {
		t.Fatalf("confirmed call: %d %v", status, body)
	}
	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":1}`, "Idempotency-Key", "k-1"); status != 200 {
		t.Fatalf("call with an idempotency key: %d %v", status, body)
	}
	calls := len(up.called())

	gw.reload(context.Background())

	status, body := post(t, base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`, "X-AXAG-Confirmation", conf)
	if d := errorDetails(body); status != http.StatusPreconditionRequired || errorCode(body) != "AXAG_CONFIRMATION_MISSING" || d["reason"] != "already_used" {
		t.Errorf("a confirmation token used before a reload, used again after it: %d %v, want 428 AXAG_CONFIRMATION_MISSING with reason already_used", status, body)
	}
	status, body = post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":1}`, "Idempotency-Key", "k-1")
	if status != 200 {
		t.Errorf("retry with the idempotency key after a reload: %d %v", status, body)
	}
	if n := len(up.called()); n != calls {
		t.Errorf("after a reload the upstream got %d more calls (%+v), want none: the idempotency record was lost", n-calls, up.called()[calls:])
	}

	// Rate-limit counts survive a reload too.
	var m map[string]any
	data, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["actions"].([]any)[0].(map[string]any)["rate_limit"] = "1/hour"
	if err := os.WriteFile(mpath, []byte(toJSON(m)), 0o644); err != nil {
		t.Fatal(err)
	}
	gw.reload(context.Background())
	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-2","quantity":1}`); status != 200 {
		t.Fatalf("first call under 1/hour: %d %v", status, body)
	}
	gw.reload(context.Background())
	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-3","quantity":1}`); status != http.StatusTooManyRequests || errorCode(body) != "AXAG_RATE_LIMITED" {
		t.Errorf("second call under 1/hour, after a reload: %d %v, want 429 AXAG_RATE_LIMITED", status, body)
	}
}

// TestServeReloadKeepsEphemeralKey: with no key configured, a token signed
// by the gateway's ephemeral key before a reload still verifies after it.
func TestServeReloadKeepsEphemeralKey(t *testing.T) {
	t.Parallel()
	up := &fakeUpstream{}
	gw, base, _ := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{anonymous: true}}, up)
	tok, _, err := gw.current().enf.IssueConfirmation(context.Background(), middleware.Principal{}, "order_place", json.RawMessage(`{"cart_id":"c-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	gw.reload(context.Background())
	if status, body := post(t, base, "/tools/order_place/call", "", `{"cart_id":"c-1"}`, "X-AXAG-Confirmation", tok); status != 200 {
		t.Errorf("a token issued before the reload: %d %v", status, body)
	}
}

// TestServeUpstreamRedirect: a redirect from the upstream is a failure, and
// is not followed — following it would send the arguments and the caller's
// identity elsewhere.
func TestServeUpstreamRedirect(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	elsewhere := &fakeUpstream{}
	elsewhereSrv := httptest.NewServer(elsewhere)
	defer elsewhereSrv.Close()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		redirecting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			http.Redirect(w, r, elsewhereSrv.URL+r.URL.Path, status)
		})
		_, base, _ := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{jwks: pki.jwks}}, redirecting)
		got, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":1}`)
		if got != http.StatusBadGateway || errorCode(body) != "AXGATE_TOOL_FAILED" || errorDetails(body)["upstream_status"] != float64(status) {
			t.Errorf("upstream %d: %d %v, want 502 AXGATE_TOOL_FAILED with upstream_status %d", status, got, body, status)
		}
	}
	if calls := elsewhere.called(); len(calls) != 0 {
		t.Errorf("the redirect was followed: %+v", calls)
	}
}

// TestServeTimeouts: a slow client cannot hold a connection open forever.
func TestServeTimeouts(t *testing.T) {
	t.Parallel()
	srv := newServer(http.NotFoundHandler(), serveConfig{upstreamTimeout: time.Minute}, slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("unset timeouts: header %v, read %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
	// The write deadline runs from the end of the headers: it must leave
	// room to read the body and wait for the upstream.
	if srv.WriteTimeout <= srv.ReadTimeout+time.Minute {
		t.Errorf("WriteTimeout %v leaves no room for a read of %v and an upstream of 1m", srv.WriteTimeout, srv.ReadTimeout)
	}
}

// rawUpstream records the bodies the gateway forwards, byte for byte.
type rawUpstream struct {
	mu     sync.Mutex
	bodies []string
}

func (u *rawUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(body))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"result":{"ok":true}}`)
}

func (u *rawUpstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// Regression (issue 13): the gateway forwarded the caller's bytes, which the
// upstream's parser may read otherwise than the gates did. It now forwards
// the RFC 8785 encoding of the arguments the chain checked.
func TestServeForwardsCanonicalArguments(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := &rawUpstream{}
	_, base, _ := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{jwks: pki.jwks}}, up)
	sent := "{ \"quantity\" : 2.0E0,\n  \"product_id\" : \"p\\u002D1\" }"
	status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, sent)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, body)
	}
	if got := up.got(); len(got) != 1 || got[0] != `{"product_id":"p-1","quantity":2}` {
		t.Fatalf("upstream got %q", got)
	}
}

// Regression (issue 13): serve's server took net/http's default header limit
// of 1 MiB, so 500 connections with a 1 MB header held 1.2 GB. Headers over
// 64 KiB now get 431 before any handler runs.
func TestServeRefusesHugeHeaders(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	srv := newServer(h, serveConfig{upstreamTimeout: time.Minute}, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	status := func(headerBytes int) int {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Written from another goroutine: the server answers 431 before it
		// has read the whole header, and stops reading.
		go func() {
			fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", headerBytes))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("a %d-byte header: %v", headerBytes, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(1 << 20); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 1 MB header: %d, want 431", got)
	}
	select {
	case <-ran:
		t.Fatal("the handler ran for a 1 MB header")
	default:
	}
	if got := status(16 << 10); got != http.StatusOK {
		t.Fatalf("a 16 KiB header: %d, want 200", got)
	}
}

// traceUpstream records the trace headers of the calls forwarded to it.
type traceUpstream struct {
	mu            sync.Mutex
	parents, bags []string
}

func (u *traceUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.parents = append(u.parents, r.Header.Get("traceparent"))
	u.bags = append(u.bags, r.Header.Get("baggage"))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"result":{"ok":true}}`)
}

// Regression (issue 15): the README says serve continues the caller's W3C
// trace context, but serve used the global propagator, which is a no-op
// until a program sets one, so nothing was forwarded. The upstream now
// gets a traceparent of the caller's trace, and the caller's baggage.
func TestServeForwardsTraceContext(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := &traceUpstream{}
	_, base, _ := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{jwks: pki.jwks}}, up)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":1}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01", "baggage", "tenant=acme")
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, body)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.parents) != 1 || !strings.HasPrefix(up.parents[0], "00-"+traceID+"-") || up.bags[0] != "tenant=acme" {
		t.Fatalf("upstream got traceparent %q, baggage %q; want the trace %s and the caller's baggage", up.parents, up.bags, traceID)
	}
}
