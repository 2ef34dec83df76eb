package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/wire"
	"github.com/axgate/axgate/token"
)

// nodeDir holds the Node client test and its package.json.
var nodeDir = filepath.Join("..", "..", "adapters", "mcpgate", "testdata", "node")

// manifestForTest is the shop manifest (examples/shop/shop.json).
func manifestForTest(t *testing.T) string {
	t.Helper()
	p := defaultManifest()
	if !fileExists(p) {
		t.Fatalf("no shop manifest at %s", p)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// start runs the server in the process on free ports and returns where it
// listens, once it does.
func start(t *testing.T, args ...string) ready {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan ready, 1)
	done := make(chan error, 1)
	args = append([]string{"-manifest", manifestForTest(t)}, args...)
	go func() {
		done <- run(ctx, args, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, io.Discard, func(r ready) { got <- r })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	select {
	case r := <-got:
		return r
	case err := <-done:
		done <- nil // for the cleanup
		t.Fatalf("server did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start in 30 s")
	}
	return ready{}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func refusalCode(t *testing.T, res *mcp.CallToolResult) (string, map[string]any) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a refusal, got %+v", res.StructuredContent)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return env.Error.Code, env.Error.Details
}

var order = map[string]any{"cart_id": "3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f", "shipping_address_id": "home"}

// TestStreamableHTTP walks the example over HTTP with the Go SDK client: no
// bearer is refused, bad arguments are refused, good ones succeed, a
// confirmation comes from the person's endpoint.
func TestStreamableHTTP(t *testing.T) {
	r := start(t, "-http", "127.0.0.1:0", "-human", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	anon := mcp.NewClient(&mcp.Implementation{Name: "anon", Version: "v0"}, nil)
	if _, err := anon.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.MCPURL}, nil); err == nil {
		t.Error("connected without a bearer token")
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: r.MCPURL, HTTPClient: &http.Client{Transport: bearerTransport{r.AgentToken}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "product_search", Arguments: map[string]any{"limit": 500}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := refusalCode(t, res); !strings.HasPrefix(code, "AXAG_") {
		t.Errorf("code = %s", code)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "product_search", Arguments: map[string]any{"query": "lamp"}})
	if err != nil || res.IsError {
		t.Fatalf("search: %v %+v", err, res)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "order_place", Arguments: order})
	if err != nil {
		t.Fatal(err)
	}
	if code, d := refusalCode(t, res); code != "AXAG_CONFIRMATION_MISSING" || d["confirmation_message"] == nil {
		t.Fatalf("refusal = %s %v", code, d)
	}
	body, _ := json.Marshal(map[string]any{"tool": "order_place", "arguments": order})
	// The agent's own token is refused there: it cannot confirm for the
	// person.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.HumanURL+"/confirmations", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.AgentToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /confirmations with the agent's token: %v %v, want 401", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, r.HumanURL+"/confirmations", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.PersonToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.Token == "" {
		t.Fatalf("POST /confirmations: %d %v", resp.StatusCode, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "order_place", Arguments: order, Meta: mcp.Meta{wire.MetaConfirmation: tok.Token}})
	if err != nil || res.IsError {
		t.Fatalf("confirmed order: %v %+v", err, res)
	}
}

// TestStdio serves the example on stdio pipes as the local dev user.
func TestStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-manifest", manifestForTest(t)}, inR, outW, io.Discard, func(ready) {})
	}()
	defer func() {
		cancel()
		inW.Close()
		<-done
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cs, err := client.Connect(cctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "product_search", Arguments: map[string]any{"query": "lamp"}})
	if err != nil || res.IsError {
		t.Fatalf("search: %v %+v", err, res)
	}
	res, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "order_place", Arguments: order})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := refusalCode(t, res); code != "AXAG_CONFIRMATION_MISSING" {
		t.Errorf("code = %s", code)
	}
}

// TestNodeClient runs the official MCP TypeScript SDK client
// (adapters/mcpgate/testdata/node) against the example over streamable
// HTTP. It is skipped when node or npm is not installed; the SDK is
// installed from the lock file on first run.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed")
	}
	if !fileExists(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")) {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	r := start(t, "-http", "127.0.0.1:0", "-human", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "client.test.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "MCP_URL="+r.MCPURL, "HUMAN_URL="+r.HumanURL, "AGENT_TOKEN="+r.AgentToken, "PERSON_TOKEN="+r.PersonToken)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test client.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the Node client failed: %v", err)
	}
}

// TestHumanEndpointsOnlyWithDevKeys: the person-facing endpoints are a
// development convenience, so with real keys (-principal-jwks) they are not
// served by default and -human is refused.
func TestHumanEndpointsOnlyWithDevKeys(t *testing.T) {
	signer, err := token.GenerateDevKey("test-principal")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := signer.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "principals.jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}

	r := start(t, "-http", "127.0.0.1:0", "-principal-jwks", path)
	if r.HumanURL != "" || r.AgentToken != "" {
		t.Errorf("with real keys: human endpoints on %q, dev token %q", r.HumanURL, r.AgentToken)
	}

	err = run(context.Background(), []string{"-manifest", manifestForTest(t), "-http", "127.0.0.1:0", "-human", "127.0.0.1:0", "-principal-jwks", path},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, io.Discard, func(ready) { t.Error("the server started") })
	if err == nil || !strings.Contains(err.Error(), "-human is for development keys only") {
		t.Errorf("run with -human and -principal-jwks: %v", err)
	}
}

// Regression (issue 13): the servers took net/http's default header limit of
// 1 MiB. A 1 MB header now gets 431 from the running example, on both of
// its listeners.
func TestHugeHeadersRefused(t *testing.T) {
	r := start(t, "-http", "127.0.0.1:0", "-human", "127.0.0.1:0")
	for _, target := range []string{r.MCPURL, r.HumanURL} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		// Written from another goroutine: the server answers 431 before it
		// has read the whole header, and stops reading.
		go fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 1<<20))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("%s with a 1 MB header: %d, want 431", target, resp.StatusCode)
		}
	}
}
