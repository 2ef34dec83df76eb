package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/middleware"
)

// startProcess runs "axgate mcp ARGS --listen 127.0.0.1:0" (this test
// binary as axgate) as a process of its own, and waits until it listens.
func startProcess(t *testing.T, args ...string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"mcp", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), testAs+"=axgate")
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProcess{log: newLineWatcher(stderr), cmd: cmd, exited: make(chan error, 1), stderrW: stderrW}
	go func() { g.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-g.exited
		}
		stderrW.Close()
	})
	g.url = regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(g.log.waitFor(t, "axgate mcp: listening"))[1]
	return g
}

// copyInto copies src into dir and returns the copy's path.
func copyInto(t *testing.T, src, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, filepath.Base(src))
	copyFile(t, src, dst)
	return dst
}

// twoUpstreams is a configuration of two upstreams: shell, the test binary
// as an MCP server on stdio (a child per session, its pid in pidFile, the
// file api-key beside it as its API_KEY), and echo, a Go MCP server over
// streamable HTTP at echoURL; each with its manifest.
func twoUpstreams(t *testing.T, shellManifest, echoManifest, echoURL, pidFile string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(filepath.Dir(pidFile), "api-key")); err != nil {
		writeTestFile(t, filepath.Dir(pidFile), "api-key", "key-one\n")
	}
	return `anonymous: true
upstreams:
  - name: shell
    command: ` + strconv.Quote(os.Args[0]) + `
    env: {` + testAs + `: env-upstream, PIDFILE: ` + pidFile + `}
    credentials: {env_files: {API_KEY: ` + filepath.Join(filepath.Dir(pidFile), "api-key") + `}}
    manifest: ` + shellManifest + `
  - name: echo
    url: ` + echoURL + `
    manifest: ` + echoManifest + `
    call_timeout: 20s
`
}

// TestUpstreamsEndToEnd: the real binary with a configuration of two
// upstreams (a command and an HTTP server), driven by the Go SDK's client:
// the list is the union under each upstream's prefix, a call of each
// reaches its upstream, /readyz reports each upstream by name. SIGHUP
// after echo's manifest changed applies the new manifest from the next
// call while shell's session (its child) is kept; a broken file on SIGHUP
// keeps the configuration in use, and the log says why; the credentials'
// files are read again, for the children started after.
func TestUpstreamsEndToEnd(t *testing.T) {
	upURL, _ := newEchoUpstream(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "shell.pid")
	apiKey := writeTestFile(t, dir, "api-key", "key-one\n")
	shellM, echoM := copyInto(t, envManifest, dir), copyInto(t, echoManifest, dir)
	cfg := writeTestFile(t, dir, "axgate.yaml", strings.Replace(twoUpstreams(t, shellM, echoM, upURL, pidFile), "anonymous: true\n", "", 1))
	// Callers with tokens: each caller has its upstream sessions (and
	// children) of its own.
	pki := newHumanPKI(t)
	gw := startProcess(t, "--config", cfg, "--admin", "127.0.0.1:0", "--jwks", pki.jwks, "--audience", agentsAudience)
	admin := adminURL(t, gw.log)
	cs := connect(t, gw.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})

	if got, want := listed(t, cs), []string{"echo_say", "shell_env", "shell_hold"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}
	if res := callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 2}); res.IsError || !strings.Contains(resultText(res), "hihi") {
		t.Fatalf("echo_say: %s", resultText(res))
	}
	if res := callTool(t, cs, "shell_env", map[string]any{}); res.IsError || !strings.Contains(resultText(res), "PIDFILE="+pidFile) ||
		!strings.Contains(resultText(res), "API_KEY=key-one") {
		t.Fatalf("shell_env: %s", resultText(res))
	}
	req, _ := http.NewRequest(http.MethodGet, admin+"/readyz", nil)
	code, body := do(t, req)
	ups, _ := body["upstreams"].(map[string]any)
	if code != http.StatusOK || ups["shell"] != "ready" || ups["echo"] != "ready" {
		t.Errorf("/readyz = %d %v, want 200 with shell and echo ready", code, body)
	}
	// Each child writes its pid: the last one started so far is the
	// session's or /readyz's; a session restarted would start another.
	pid := fileContent(pidFile)

	// echo's manifest now allows times up to 1: from the next call; and
	// shell's API key changes: for the children started after.
	if err := os.WriteFile(apiKey, []byte("key-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(echoM)
	if err := os.WriteFile(echoM, []byte(strings.Replace(string(data), `"maximum": 3`, `"maximum": 1`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.cmd.Process.Signal(syscall.SIGHUP)
	gw.log.waitFor(t, "axgate mcp: configuration reloaded")
	refused(t, callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 2}), "AXAG_OUT_OF_RANGE", "")
	if res := callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 1}); res.IsError {
		t.Fatalf("echo_say within the new manifest: %s", resultText(res))
	}
	if res := callTool(t, cs, "shell_env", map[string]any{}); res.IsError {
		t.Fatalf("shell_env after the reload: %s", resultText(res))
	}
	if got := fileContent(pidFile); got != pid {
		t.Errorf("shell's child changed on a reload that did not change shell: pid %s, then %s", pid, got)
	}

	// A broken file: the upstreams in use stay, and the log says why.
	if err := os.WriteFile(cfg, []byte("upstreams:\n  - name: shell\n    url: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.cmd.Process.Signal(syscall.SIGHUP)
	gw.log.waitFor(t, "reload failed; keeping the upstreams in use")
	if res := callTool(t, cs, "shell_env", map[string]any{}); res.IsError {
		t.Fatalf("shell_env after a failed reload: %s", resultText(res))
	}
	refused(t, callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 2}), "AXAG_OUT_OF_RANGE", "")
	if got := fileContent(pidFile); got != pid {
		t.Errorf("shell's child changed on a failed reload: pid %s, then %s", pid, got)
	}
	// Another caller's child has the key read again at SIGHUP; the log
	// never shows a key.
	cs2 := connect(t, gw.url, &http.Client{Transport: bearerTransport{pki.bobAgent}})
	if res := callTool(t, cs2, "shell_env", map[string]any{}); res.IsError || !strings.Contains(resultText(res), "API_KEY=key-two") {
		t.Errorf("a child started after SIGHUP: %s, want API_KEY=key-two", resultText(res))
	}
	if strings.Contains(gw.log.all(), "key-one") || strings.Contains(gw.log.all(), "key-two") {
		t.Errorf("the log shows an API key:\n%s", gw.log.all())
	}
	cs2.Close()
	cs.Close()
	gw.stop(t)
}

// TestUpstreamsHumanDecidesTheSecondUpstreamsCall: with --human and two
// upstreams, a call of the second upstream's tool that needs the person's
// confirmation and an admin's approval is decided at --human (POST
// /confirmations names the tool as its upstream does, POST /approvals/{id}
// decides the request), and then runs.
func TestUpstreamsHumanDecidesTheSecondUpstreamsCall(t *testing.T) {
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "axgate.yaml", strings.Replace(
		twoUpstreams(t, envManifest, confirmManifest, upURL, filepath.Join(dir, "pid")), "anonymous: true\n", "", 1))
	gw := startGatewayProcess(t, "--config", cfg, "--jwks", pki.jwks, "--signing-key", pki.key,
		"--audience", agentsAudience, "--human-audience", peopleAudience)
	alice := connect(t, gw.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	args, say := sayArgs("pay")
	refused(t, callTool(t, alice, "echo_say", say), "AXAG_CONFIRMATION_MISSING", "")
	code, body := confirmAt(t, gw.human, pki.alicePerson, args)
	confirmation, _ := body["token"].(string)
	if code != http.StatusOK || confirmation == "" {
		t.Fatalf("confirmation of echo's say at --human: %d %v", code, body)
	}
	details := refused(t, callTool(t, alice, "echo_say", say, middleware.Credentials{Confirmation: confirmation}), "AXAG_APPROVAL_MISSING", "")
	id, _ := details["approval_request_id"].(string)
	code, body = post(t, gw.human, "/approvals/"+id, pki.bobPerson, `{"approve":true}`)
	approval, _ := body["token"].(string)
	if code != http.StatusOK || approval == "" {
		t.Fatalf("approval of echo's say at --human: %d %v", code, body)
	}
	if res := callTool(t, alice, "echo_say", say, middleware.Credentials{Confirmation: confirmation, Approvals: []string{approval}}); res.IsError {
		t.Fatalf("the confirmed and approved call: %s", resultText(res))
	}
	alice.Close()
	gw.stop(t)
}

// TestUpstreamsReadyzWhileOneIsDown: with one of two upstreams down,
// /readyz answers 200 (the gateway serves the other's calls, as
// Gateway.Ready decides) and reports each upstream by name: the one that
// serves as ready, the other with why not; its tools are refused while the
// other's answer.
func TestUpstreamsReadyzWhileOneIsDown(t *testing.T) {
	upURL, echoSrv := newEchoUpstream(t)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "axgate.yaml", twoUpstreams(t, envManifest, echoManifest, upURL, filepath.Join(dir, "pid")))
	gw := startProcess(t, "--config", cfg, "--admin", "127.0.0.1:0")
	admin := adminURL(t, gw.log)
	// No new connection to echo, and those open (the gateway's) cut.
	echoSrv.Listener.Close()
	echoSrv.CloseClientConnections()
	req, _ := http.NewRequest(http.MethodGet, admin+"/readyz", nil)
	code, body := do(t, req)
	ups, _ := body["upstreams"].(map[string]any)
	if why, _ := ups["echo"].(string); code != http.StatusOK || ups["shell"] != "ready" || why == "" || why == "ready" {
		t.Errorf("/readyz with echo down = %d %v, want 200, shell ready and why echo is not", code, body)
	}
	cs := connect(t, gw.url, http.DefaultClient)
	if res := callTool(t, cs, "shell_env", map[string]any{}); res.IsError {
		t.Errorf("shell_env with echo down: %s", resultText(res))
	}
	if res := callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 1}); !res.IsError {
		t.Errorf("echo_say with echo down answered: %s", resultText(res))
	}
	cs.Close()
	gw.stop(t)
}

// TestUpstreamsPagesDecideTheSecondUpstreamsCall: with --human serving the
// pages (an OpenID provider's sign-in) and two upstreams, the second
// upstream's call that needs the person's confirmation and an admin's
// approval names its page; the person confirms there, the admin approves
// there, and the same call repeated then runs.
func TestUpstreamsPagesDecideTheSecondUpstreamsCall(t *testing.T) {
	op, secret := startOIDCProvider(t)
	dir := t.TempDir()
	upURL, _ := newEchoUpstream(t)
	pki := newServePKI(t)
	alice := personWithRoles{sub: "alice", tenant: "acme", roles: []string{"editor"}}
	bob := personWithRoles{sub: "bob", tenant: "acme", roles: []string{"admin"}}
	agentToken := mint(t, "principal", "--key", pki.key, "--sub", alice.sub, "--tenant", alice.tenant, "--roles", "editor", "--aud", agentsAudience)
	cfg := writeTestFile(t, dir, "axgate.yaml", strings.Replace(
		twoUpstreams(t, envManifest, confirmManifest, upURL, filepath.Join(dir, "pid")), "anonymous: true\n", "", 1))
	gw := startGatewayProcess(t, "--config", cfg, "--jwks", pki.jwks, "--signing-key", pki.key,
		"--audience", agentsAudience, "--human-audience", peopleAudience,
		"--oidc-issuer", op.Issuer(), "--oidc-client-id", op.Config().ClientID, "--oidc-client-secret-file", secret)
	cs := connect(t, gw.url, &http.Client{Transport: bearerTransport{agentToken}})
	say := map[string]any{"text": "paged", "times": 1}
	d := refused(t, callTool(t, cs, "echo_say", say), "AXAG_CONFIRMATION_MISSING", "")
	page, _ := d["decision_url"].(string)
	if !strings.HasPrefix(page, gw.human+"/requests/") {
		t.Fatalf("the refusal names the page %q, want one under %s/requests/", page, gw.human)
	}
	decideOnPage(t, op, alice, page, "confirm")
	d = refused(t, callTool(t, cs, "echo_say", say), "AXAG_APPROVAL_MISSING", "")
	page, _ = d["decision_url"].(string)
	decideOnPage(t, op, bob, page, "approve")
	if res := callTool(t, cs, "echo_say", say); res.IsError || !strings.Contains(resultText(res), "paged") {
		t.Fatalf("the call decided on the pages: %s", resultText(res))
	}
	cs.Close()
	gw.stop(t)
}

// TestUpstreamsShareOneManifest: upstreams without a manifest of their own
// take the actions of --manifest that name them: each serves its own
// tools, under its prefix, and nothing of the other's.
func TestUpstreamsShareOneManifest(t *testing.T) {
	upURL, _ := newEchoUpstream(t)
	dir := t.TempDir()
	shared := writeTestFile(t, dir, "axag.json", strings.Replace(sharedManifest, "%s", "echo", 1))
	cfg := writeTestFile(t, dir, "axgate.yaml", `anonymous: true
tool_separator: "."
upstreams:
  - name: shell
    command: `+strconv.Quote(os.Args[0])+`
    env: {`+testAs+`: env-upstream}
  - name: echo
    url: `+upURL+`
`)
	gw := startProcess(t, "--config", cfg, "--manifest", shared)
	cs := connect(t, gw.url, http.DefaultClient)
	if got, want := listed(t, cs), []string{"echo.say", "shell.env"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v (shell's hold is in no manifest)", got, want)
	}
	if res := callTool(t, cs, "echo.say", map[string]any{"text": "hi", "times": 1}); res.IsError || !strings.Contains(resultText(res), "hi") {
		t.Errorf("echo.say: %s", resultText(res))
	}
	if res := callTool(t, cs, "shell.env", map[string]any{}); res.IsError {
		t.Errorf("shell.env: %s", resultText(res))
	}
	refused(t, callTool(t, cs, "shell.hold", map[string]any{}), "AXAG_INTENT_NOT_FOUND", "")
	cs.Close()
	gw.stop(t)
}

// TestUpstreamsStdio: a desktop client starts one gateway (--stdio) for
// two upstreams: it lists the union and calls each.
func TestUpstreamsStdio(t *testing.T) {
	upURL, _ := newEchoUpstream(t)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "axgate.yaml", strings.Replace(
		twoUpstreams(t, envManifest, echoManifest, upURL, filepath.Join(dir, "pid")), "anonymous: true\n", "", 1))
	cmd := exec.Command(os.Args[0], "mcp", "--stdio", "--local-user", "me", "--config", cfg)
	cmd.Env = append(os.Environ(), testAs+"=axgate")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	log := newLineWatcher(pr)
	defer pw.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.all())
	}
	defer cs.Close()
	if got, want := listed(t, cs), []string{"echo_say", "shell_env", "shell_hold"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}
	if res := callTool(t, cs, "echo_say", map[string]any{"text": "hi", "times": 1}); res.IsError {
		t.Errorf("echo_say: %s", resultText(res))
	}
	if res := callTool(t, cs, "shell_env", map[string]any{}); res.IsError {
		t.Errorf("shell_env: %s", resultText(res))
	}
}
