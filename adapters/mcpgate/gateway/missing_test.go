package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notOfferedLines counts the warnings about archive_note, the manifest's
// tool that no upstream offers.
func notOfferedLines(lg *logs) int {
	n := 0
	for _, line := range strings.Split(lg.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "does not offer") && strings.Contains(line, "tool=archive_note") {
			n++
		}
	}
	return n
}

// TestMissingToolLogged: a manifest tool the upstream does not offer is
// logged, naming it, when the gateway starts and again when the upstream's
// tools are listed again; the tools it offers are not.
func TestMissingToolLogged(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	var lg logs
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	if n := notOfferedLines(&lg); n != 1 {
		t.Fatalf("at start, %d warnings name archive_note, want 1:\n%s", n, lg.String())
	}
	if strings.Contains(lg.String(), "tool=read_note") {
		t.Errorf("a tool the upstream offers is logged as missing:\n%s", lg.String())
	}
	changed := make(chan struct{}, 10)
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read_note: %s", text(res))
	}
	before := notOfferedLines(&lg)
	up.rugPull() // notifications/tools/list_changed: a re-list
	select {
	case <-changed: // the session's re-list is done
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told that the tools changed")
	}
	if n := notOfferedLines(&lg); n <= before {
		t.Errorf("the re-list did not log archive_note (%d warnings before, %d after):\n%s", before, n, lg.String())
	}
}

// TestMissingEntriesLogged: the manifest's prompts, resources and resource
// templates that the upstream does not list are logged at start, naming
// each; those it lists are not.
func TestMissingEntriesLogged(t *testing.T) {
	t.Parallel()
	_, upURL := payrollUpstream(t)
	doc := []byte(strings.Replace(string(payrollManifest), `"prompts": [`, `"prompts": [
  {"intent": "payroll.forecast", "entity": "payroll", "description": "Next year.", "name": "payroll_forecast"},`, 1))
	doc = []byte(strings.Replace(string(doc), `"resources": [`, `"resources": [
  {"intent": "payroll.history", "entity": "payroll", "description": "Last year.", "uri": "payroll://history"},
  {"intent": "payroll.team", "entity": "payroll", "description": "A team.", "uri_template": "payroll://teams/{team}"},
  {"intent": "payroll.any", "entity": "payroll", "description": "Under a prefix.", "uri_prefix": "payroll://archive/"},`, 1))
	var lg logs
	newGatewayFor(t, doc, gateway.Upstream{URL: upURL}, gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	out := lg.String()
	for _, want := range []string{"prompt=payroll_forecast", "resource=payroll://history", "template=payroll://teams/{team}"} {
		if !strings.Contains(out, want) || !strings.Contains(out, "does not offer") {
			t.Errorf("at start, nothing names %s as missing:\n%s", want, out)
		}
	}
	for _, offered := range []string{"prompt=payroll_summary", "resource=payroll://all", "template=payroll://employees/{id}", "payroll://archive/"} {
		if strings.Contains(out, offered) {
			t.Errorf("%s is offered (or a prefix) but logged as missing:\n%s", offered, out)
		}
	}
}
