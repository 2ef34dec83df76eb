package gateway_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestSandboxWithoutBwrap: with no bwrap in PATH, a sandbox "on" fails New
// with the reason, and "optional" logs a warning and serves calls through
// an unsandboxed child. (Not parallel: it sets PATH.)
func TestSandboxWithoutBwrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := newGatewayErr(t, stdioUpstream(), gateway.WithSandbox(gateway.Sandbox{Mode: "on"}))
	if err == nil || !strings.Contains(err.Error(), "bubblewrap (bwrap) is not in PATH") {
		t.Fatalf("New with sandbox on and no bwrap: %v, want the reason (bwrap not in PATH)", err)
	}
	var lg logs
	g := newGateway(t, stdioUpstream(), "", gateway.WithSandbox(gateway.Sandbox{Mode: "optional"}),
		gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	if !strings.Contains(lg.String(), "unsandboxed") || !strings.Contains(lg.String(), "bwrap") {
		t.Errorf("sandbox optional without bwrap logged no warning with the reason:\n%s", lg.String())
	}
	cs := connect(t, serve(t, g), "alice-token", nil)
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("a call through the unsandboxed child: %s", text(res))
	}
}

// TestSandboxOptionsChecked: a mode New does not know, a sandbox for an
// HTTP upstream and a listed path that does not exist fail New.
func TestSandboxOptionsChecked(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		up gateway.Upstream
		s  gateway.Sandbox
	}{
		"mode":    {stdioUpstream(), gateway.Sandbox{Mode: "yes"}},
		"url":     {gateway.Upstream{URL: "http://127.0.0.1:1/mcp"}, gateway.Sandbox{Mode: "optional"}},
		"missing": {stdioUpstream(), gateway.Sandbox{Mode: "optional", ReadOnly: []string{"/nonexistent/axgate-sandbox"}}},
	} {
		if g, err := newGatewayErr(t, c.up, gateway.WithSandbox(c.s)); err == nil {
			g.Close()
			t.Errorf("%s: New passed with %+v", name, c.s)
		}
	}
}
