package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
)

// echoManifest declares the tool "say" of newEchoUpstream: text (at most
// 64 characters) said times times, times between 1 and 3.
var echoManifest = filepath.Join("testdata", "mcp", "echo.axag.json")

// newEchoUpstream is an MCP server in Go over streamable HTTP, with one
// tool, "say". It returns its /mcp URL and the server, which the test may
// close.
func newEchoUpstream(t *testing.T) (string, *httptest.Server) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "echo-upstream", Version: "v1"}, nil)
	type in struct {
		Text  string `json:"text"`
		Times int    `json:"times"`
	}
	type out struct {
		Said string `json:"said"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "say", Description: "Says the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
			return nil, out{Said: strings.Repeat(a.Text, a.Times)}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", srv
}

// connect connects the Go SDK's client to url through client.
func connect(t *testing.T, url string, client *http.Client) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// adminURL returns the admin server's URL from the log.
func adminURL(t *testing.T, log *lineWatcher) string {
	t.Helper()
	line := log.waitFor(t, "admin server listening")
	return regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)[1]
}

// readAudit returns the JSON lines of the audit file once it holds n.
func readAudit(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var recs []map[string]any
		raw, _ := os.ReadFile(path)
		s := bufio.NewScanner(strings.NewReader(string(raw)))
		for s.Scan() {
			var r map[string]any
			if err := json.Unmarshal(s.Bytes(), &r); err != nil {
				t.Fatalf("audit line is not JSON: %q: %v", s.Text(), err)
			}
			recs = append(recs, r)
		}
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit file %s holds %d records, want %d:\n%s", path, len(recs), n, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMCPOperations: axgate mcp --config F takes its flags from the file
// (the command line winning over it); after an allowed and a refused
// tools/call, the admin server's /metrics counts one of each with the
// refusal's code and the duration histogram holds both; the audit file
// holds one JSON line per decision, without argument values; /readyz fails
// once the upstream is down.
func TestMCPOperations(t *testing.T) {
	t.Parallel()
	upURL, up := newEchoUpstream(t)
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit", "mcp.jsonl")
	config := writeConfig(t, strings.Join([]string{
		"manifest: " + echoManifest,
		"upstream-url: " + upURL,
		"anonymous: true",
		"listen: 192.0.2.1:1", // the command line's --listen wins
		"admin: 127.0.0.1:0",
		"audit: file:" + auditFile,
	}, "\n"))
	gw := startMCP(t, nil, "--config", config)
	admin := adminURL(t, gw.log)
	cs := connect(t, gw.url, http.DefaultClient)

	if res := callTool(t, cs, "say", map[string]any{"text": "allowed-secret", "times": 2}); res.IsError || !strings.Contains(resultText(res), "allowed-secretallowed-secret") {
		t.Fatalf("allowed call: %s", resultText(res))
	}
	refused(t, callTool(t, cs, "say", map[string]any{"text": "refused-secret", "times": 9}), "AXAG_OUT_OF_RANGE", "")

	fams := scrape(t, admin)
	decisions := fams["axag_decisions_total"]
	if decisions == nil || decisions.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("no counter axag_decisions_total in /metrics")
	}
	counts := map[string]float64{}
	for _, m := range decisions.GetMetric() {
		counts[label(m, "axag_decision")+" "+label(m, "axag_error_code")] += m.GetCounter().GetValue()
	}
	if counts["allow "] != 1 || counts["deny AXAG_OUT_OF_RANGE"] != 1 || len(counts) != 2 {
		t.Errorf("axag_decisions_total by decision and code: %v, want one allow and one deny AXAG_OUT_OF_RANGE\n%v", counts, decisions)
	}
	var n uint64
	for _, m := range fams["axag_call_duration_seconds"].GetMetric() {
		n += m.GetHistogram().GetSampleCount()
	}
	if n != 2 {
		t.Errorf("axag_call_duration_seconds counts %d calls, want 2", n)
	}

	recs := readAudit(t, auditFile, 2)
	raw, _ := os.ReadFile(auditFile)
	for _, secret := range []string{"allowed-secret", "refused-secret"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit holds the argument value %q:\n%s", secret, raw)
		}
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[toJSON(r["decision"])+" "+toJSON(r["code"])] = true
	}
	if len(recs) != 2 || !seen[`"allow" null`] && !seen[`"allow" ""`] || !seen[`"deny" "AXAG_OUT_OF_RANGE"`] {
		t.Errorf("audit records: %v\n%s", seen, raw)
	}
	if strings.Contains(gw.log.all(), "AXAG_OUT_OF_RANGE") {
		t.Errorf("with --audit file:PATH the decisions reach the log too:\n%s", gw.log.all())
	}

	if status, body := getStatus(t, admin+"/readyz"); status != 200 || body["status"] != "ready" {
		t.Errorf("/readyz with the upstream up: %d %v", status, body)
	}
	// The gateway keeps its upstream sessions open: stop new connections
	// and cut the open ones (httptest's Close would wait for them).
	up.Listener.Close()
	up.CloseClientConnections()
	status, body := getStatus(t, admin+"/readyz")
	if problems, _ := json.Marshal(body["problems"]); status != http.StatusServiceUnavailable || !strings.Contains(string(problems), "upstream") {
		t.Errorf("/readyz with the upstream down: %d %v, want 503 naming the upstream", status, body)
	}
	if code := gw.stop(); code != exitOK {
		t.Errorf("exit %d", code)
	}
}

// TestMCPTLS: with --tls-cert and --tls-key, /mcp is served over HTTPS (the
// resource URL says https), the Go SDK's client reaches it with a client
// that trusts the test CA, and a plain HTTP client does not.
func TestMCPTLS(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "gateway", 2, true)
	gw := startMCP(t, nil, "--manifest", echoManifest, "--upstream-url", upURL, "--anonymous",
		"--tls-cert", cert, "--tls-key", key, "--audit", "off")
	if !strings.HasPrefix(gw.url, "https://127.0.0.1:") {
		t.Fatalf("listening at %s, want https", gw.url)
	}
	cs := connect(t, gw.url, pki.tlsClient(t, "", ""))
	if res := callTool(t, cs, "say", map[string]any{"text": "hi", "times": 1}); res.IsError || !strings.Contains(resultText(res), "hi") {
		t.Fatalf("call over TLS: %s", resultText(res))
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: strings.Replace(gw.url, "https://", "http://", 1)}, nil); err == nil {
		t.Errorf("a plain HTTP client connected to the TLS front")
	}
}

// TestMCPOpsUsage: what mcp refuses of the operations flags, and config
// check --command mcp.
func TestMCPOpsUsage(t *testing.T) {
	t.Parallel()
	stdio := []string{"mcp", "--manifest", echoManifest, "--upstream-url", "http://127.0.0.1:1/mcp", "--stdio", "--local-user", "me"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(stdio, "--audit", "stdout"), "the audit cannot go there"},
		{append(stdio, "--tls-cert", "c.pem", "--tls-key", "k.pem"), "apply to --human only"},
	} {
		if _, stderr, code := cli(t, nil, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want usage error %q\n%s", tc.args, code, tc.want, stderr)
		}
	}

	good := writeConfig(t, "manifest: m.json\nupstream-url: http://tools:9000/mcp\nhuman: 127.0.0.1:8081\naudit: file:/var/log/axgate/mcp.jsonl\n")
	out, stderr, code := cli(t, nil, "config", "check", good, "--command", "mcp")
	if code != exitOK || !strings.Contains(out, "valid configuration for axgate mcp") || !regexp.MustCompile(`upstream-url\s+http://tools:9000/mcp\s+\(file\)`).MatchString(out) {
		t.Errorf("config check --command mcp: exit %d\n%s%s", code, out, stderr)
	}
	// serve's key is not mcp's, and the other way round.
	if _, stderr, code := cli(t, nil, "config", "check", writeConfig(t, "upstream: http://tools:9000\n"), "--command", "mcp"); code == exitOK || !strings.Contains(stderr, "upstream") {
		t.Errorf("serve's upstream: key for mcp: exit %d\n%s", code, stderr)
	}
	if _, _, code := cli(t, nil, "config", "check", good); code == exitOK {
		t.Errorf("mcp's keys accepted for serve")
	}
	// mcp applies the enforce: section, as serve does: checked against the
	// manifest before anything starts.
	_, stderr, code = cli(t, nil, "mcp", "--config", writeConfig(t, "enforce:\n  echo.nope: shadow\n"), "--manifest", echoManifest, "--upstream-url", "http://127.0.0.1:1/mcp", "--anonymous")
	if code != exitFail || !strings.Contains(stderr, "enforce.echo.nope") {
		t.Errorf("mcp with enforce: for an intent the manifest lacks: exit %d\n%s", code, stderr)
	}
}

// TestMCPStdioOps: with --stdio (standard output is the protocol) the
// admin server and the audit still work: the audit lines go to standard
// error, the client sees only protocol messages, and /metrics counts the
// calls.
func TestMCPStdioOps(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	cmd := exec.Command(os.Args[0], "mcp", "--stdio", "--manifest", echoManifest, "--upstream-url", upURL,
		"--local-user", "alice", "--admin", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), testAs+"=axgate")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	log := newLineWatcher(pr)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.all())
	}
	defer pw.Close()
	defer cs.Close()
	admin := adminURL(t, log)
	if res := callTool(t, cs, "say", map[string]any{"text": "stdio-secret", "times": 1}); res.IsError {
		t.Fatalf("allowed call: %s", resultText(res))
	}
	refused(t, callTool(t, cs, "say", map[string]any{"text": "stdio-secret", "times": 7}), "AXAG_OUT_OF_RANGE", "")

	line := log.waitFor(t, `"code":"AXAG_OUT_OF_RANGE"`)
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["decision"] != "deny" {
		t.Errorf("audit line on standard error: %q (%v)", line, err)
	}
	if strings.Contains(log.all(), "stdio-secret") {
		t.Errorf("an argument value reached standard error:\n%s", log.all())
	}
	counts := map[string]float64{}
	for _, m := range scrape(t, admin)["axag_decisions_total"].GetMetric() {
		counts[label(m, "axag_decision")+" "+label(m, "axag_error_code")] += m.GetCounter().GetValue()
	}
	if counts["allow "] != 1 || counts["deny AXAG_OUT_OF_RANGE"] != 1 {
		t.Errorf("axag_decisions_total: %v", counts)
	}
	// AXGATE_AUDIT=stdout is refused with --stdio as the flag is.
	if _, stderr, code := cli(t, map[string]string{"AXGATE_AUDIT": "stdout"}, "mcp", "--stdio", "--manifest", echoManifest,
		"--upstream-url", upURL, "--local-user", "alice"); code != exitUsage || !strings.Contains(stderr, "the audit cannot go there") {
		t.Errorf("AXGATE_AUDIT=stdout with --stdio: exit %d\n%s", code, stderr)
	}
}
