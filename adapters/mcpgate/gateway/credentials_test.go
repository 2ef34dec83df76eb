package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestUpstreamHeaderFilesReachUpstreamNeverLogged: the header read from a
// file reaches the upstream on both paths' requests, the caller's own
// bearer token never does, ReloadCredentials reads the file again, and
// neither value appears in a log line.
func TestUpstreamHeaderFilesReachUpstreamNeverLogged(t *testing.T) {
	_, sdk := notesHandler()
	var mu sync.Mutex
	seen := map[string]int{} // X-Api-Key values
	var authz []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Api-Key")]++
		if a := r.Header.Get("Authorization"); a != "" {
			authz = append(authz, a)
		}
		mu.Unlock()
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte("sk-first-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g := newGateway(t, gateway.Upstream{URL: hs.URL, Credentials: &gateway.UpstreamCredentials{
		HeaderFiles: map[string]string{"X-Api-Key": keyFile},
	}}, "", gateway.WithLogger(logger))
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	call := func() {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = res
	}
	call()
	if err := os.WriteFile(keyFile, []byte("sk-second-9876543210\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadCredentials(); err != nil {
		t.Fatal(err)
	}
	call()
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadCredentials(); err == nil || strings.Contains(err.Error(), "sk-") {
		t.Errorf("ReloadCredentials of a missing file: %v, want an error naming the file only", err)
	}
	call() // the value read before stays in use

	mu.Lock()
	defer mu.Unlock()
	if seen[""] != 0 {
		t.Errorf("%d upstream requests came without the header", seen[""])
	}
	if seen["sk-first-0123456789"] == 0 || seen["sk-second-9876543210"] == 0 {
		t.Errorf("the upstream saw the header values %v, want both the first and, after the reload, the second", seen)
	}
	if len(authz) != 0 {
		t.Errorf("the upstream saw Authorization headers %q: the caller's own token must never reach it", authz)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, v := range []string{"sk-first", "sk-second", "alice-token"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the log holds %q", v)
		}
	}
}

// TestUpstreamEnvFilesReachChild: a command upstream's child gets the
// variable read from a file; a child started after ReloadCredentials gets
// the new value; neither is logged.
func TestUpstreamEnvFilesReachChild(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("env-secret-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logMu sync.Mutex
	up := stdioUpstream()
	up.Credentials = &gateway.UpstreamCredentials{EnvFiles: map[string]string{"NOTES_TOKEN": f}}
	g := newGateway(t, up, "", gateway.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	url := serve(t, g)
	childEnv := func() string {
		t.Helper()
		cs := connect(t, url, "alice-token", nil)
		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://env"})
		if err != nil {
			t.Fatal(err)
		}
		return rr.Contents[0].Text
	}
	if env := childEnv(); !strings.Contains(env, "NOTES_TOKEN=env-secret-one") {
		t.Errorf("the child's environment lacks NOTES_TOKEN from the file:\n%s", env)
	}
	if err := os.WriteFile(f, []byte("env-secret-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadCredentials(); err != nil {
		t.Fatal(err)
	}
	if env := childEnv(); !strings.Contains(env, "NOTES_TOKEN=env-secret-two") {
		t.Errorf("a child started after the reload lacks the new value:\n%s", env)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "env-secret") {
		t.Error("the log holds the value")
	}
}

// TestUpstreamCredentialsRefusedForTheOtherKind: New refuses environment
// files for an HTTP upstream, headers for a command, and a file it cannot
// read.
func TestUpstreamCredentialsRefusedForTheOtherKind(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "k")
	if err := os.WriteFile(f, []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, up := range map[string]gateway.Upstream{
		"env files for an HTTP upstream": {URL: "http://127.0.0.1:1/mcp", Credentials: &gateway.UpstreamCredentials{EnvFiles: map[string]string{"K": f}}},
		"headers for a command":          {Command: "true", Credentials: &gateway.UpstreamCredentials{HeaderFiles: map[string]string{"K": f}}},
		"a missing header file":          {URL: "http://127.0.0.1:1/mcp", Credentials: &gateway.UpstreamCredentials{HeaderFiles: map[string]string{"K": f + ".missing"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := gateway.New(newEnforcer(t), up); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
