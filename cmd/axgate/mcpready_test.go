package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPReadyz: axgate mcp's /readyz fails, naming the upstream's answer,
// while the upstream does not start sessions (its host still takes TCP
// connections: it answers 503), and is ready again once it does.
func TestMCPReadyz(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read one document."},
		func(context.Context, *mcp.CallToolRequest, struct {
			Path string `json:"path"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "doc"}}}, nil, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var down atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close) // after the gateway has stopped (cleanups run last first)
	m := filepath.Join(t.TempDir(), "axag.json")
	if err := os.WriteFile(m, []byte(`{"version": "1.0.0", "actions": [
  {"intent": "doc.read", "entity": "doc", "action_type": "read", "operation_id": "read",
   "description": "Read one document by its path.",
   "required_parameters": [{"name": "path", "type": "string", "description": "The document's path"}],
   "risk_level": "none", "idempotent": true, "scope": "global"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startMCP(t, nil, "--manifest", m, "--upstream-url", up.URL, "--anonymous", "--admin", "127.0.0.1:0", "--audit", "off")
	admin := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(gw.log.waitFor(t, "admin server listening"))[1]
	if status, body := getStatus(t, admin+"/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz with the upstream up: %d %v", status, body)
	}

	down.Store(true) // no client session needs to find out
	readyz := func(want int) (int, string) {
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, body := getStatus(t, admin+"/readyz")
			problems, _ := json.Marshal(body["problems"])
			if status == want || time.Now().After(end) {
				return status, string(problems)
			}
		}
	}
	if status, problems := readyz(http.StatusServiceUnavailable); status != http.StatusServiceUnavailable || !strings.Contains(problems, "Service Unavailable") {
		t.Fatalf("/readyz while the upstream answers 503: %d %s, want 503 naming the upstream's answer", status, problems)
	}
	down.Store(false)
	if status, problems := readyz(http.StatusOK); status != http.StatusOK {
		t.Fatalf("/readyz once the upstream is back: %d %s", status, problems)
	}
}
