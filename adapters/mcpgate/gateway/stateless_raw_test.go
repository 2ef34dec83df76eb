package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// rawStateless posts body to the gateway with the headers given (a header
// set to "" is left out) and returns the status and the whole answer.
func rawStateless(t *testing.T, url, token string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if v != "" {
			req.Header[k] = []string{v} // as written: no canonicalization
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}}`

// TestStatelessRawRequestsNeverReachUndeclaredOrForbiddenUpstreamData:
// hand-written 2026-07-28 requests that mix versions between header and
// body, leave the version header out, write it in lower case, batch, send
// notifications, initialize with a 2026 header, or ask the gateway what
// only the upstream asks (sampling, elicitation, roots) never read the
// payroll for eve (no hr role) nor anything undeclared for anyone.
func TestStatelessRawRequestsNeverReachUndeclaredOrForbiddenUpstreamData(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	url := serve(t, newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL}))
	v26 := "2026-07-28"
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{},` + meta26 + `}}`
	}
	read := `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"secret://keys",` + meta26 + `}}`
	cases := []struct {
		name, token string
		headers     map[string]string
		body        string
	}{
		{"eve payroll, 2026 header and meta", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, call("payroll")},
		{"eve payroll, lowercase header names", "eve-token", map[string]string{"mcp-protocol-version": v26, "mcp-method": "tools/call", "mcp-name": "payroll"}, call("payroll")},
		{"eve payroll, no version header", "eve-token", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, call("payroll")},
		{"eve payroll, 2025 header 2026 body", "eve-token", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, call("payroll")},
		{"eve payroll, future header", "eve-token", map[string]string{"Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, strings.ReplaceAll(call("payroll"), "2026-07-28", "2099-01-01")},
		{"eve payroll, 2026 header 2025 body", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, strings.ReplaceAll(call("payroll"), "2026-07-28", "2025-11-25")},
		{"eve payroll, upper-case version value", "eve-token", map[string]string{"Mcp-Protocol-Version": "2026-07-28 ", "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, call("payroll")},
		{"eve payroll, batch", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}, "[" + call("payroll") + "]"},
		{"eve payroll, batch no headers", "eve-token", map[string]string{"Mcp-Protocol-Version": v26}, "[" + call("payroll") + "]"},
		{"eve payroll, as a notification", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "payroll"},
			`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"payroll","arguments":{},` + meta26 + `}}`},
		{"eve payroll, header names another tool", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "read_note"}, call("payroll")},
		{"eve payroll, case-variant name key", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "nothing"},
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nothing","Name":"payroll","arguments":{},` + meta26 + `}}`},
		{"hana undeclared resource", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "resources/read", "Mcp-Name": "secret://keys"}, read},
		{"hana undeclared resource, no Mcp-Name", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "resources/read"}, read},
		{"hana subscribe", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "resources/subscribe", "Mcp-Name": "secret://keys"},
			`{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"secret://keys",` + meta26 + `}}`},
		{"hana initialize with a 2026 header", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "initialize"},
			`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"x","version":"1"},` + meta26 + `}}`},
		{"hana undeclared completion", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "completion/complete"},
			`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"secret://{name}"},"argument":{"name":"name","value":""},` + meta26 + `}}`},
		{"eve declared completion", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "completion/complete"},
			`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"payroll_summary"},"argument":{"name":"employee","value":""},` + meta26 + `}}`},
		{"eve templates list", "eve-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "resources/templates/list"},
			`{"jsonrpc":"2.0","id":7,"method":"resources/templates/list","params":{` + meta26 + `}}`},
		{"hana sampling to the gateway", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "sampling/createMessage"},
			`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,` + meta26 + `}}`},
		{"hana roots to the gateway", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "roots/list"},
			`{"jsonrpc":"2.0","id":7,"method":"roots/list","params":{` + meta26 + `}}`},
		{"hana elicitation to the gateway", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "elicitation/create"},
			`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"x","requestedSchema":{"type":"object"},` + meta26 + `}}`},
		{"hana a response", "hana-token", map[string]string{"Mcp-Protocol-Version": v26}, `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///"}]}}`},
		{"hana roots changed", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "notifications/roots/list_changed"}, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`},
		{"hana setLevel", "hana-token", map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "logging/setLevel"}, `{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"debug",` + meta26 + `}}`},
	}
	for _, c := range cases {
		status, raw := rawStateless(t, url, c.token, c.headers, c.body)
		t.Logf("%s: %d %.300s", c.name, status, raw)
		if strings.Contains(raw, salaries) || strings.Contains(raw, "180000") {
			t.Errorf("%s: the answer carries the payroll: %d %s", c.name, status, raw)
		}
	}
	for _, m := range []string{"tools/call", "resources/read", "resources/subscribe", "completion/complete", "logging/setLevel"} {
		if got := up.saw(m); len(got) != 0 {
			t.Errorf("the upstream saw %v", got)
		}
	}
}

// TestStatelessCallersOfTwoTenantsNeverShareALink: carol of tenant t1 and
// carol of tenant t2 are two callers: their stateless calls go on two
// upstream sessions.
func TestStatelessCallersOfTwoTenantsNeverShareALink(t *testing.T) {
	t.Parallel()
	up, sessionsOf := upstreamSessions(t)
	url := serve(t, newGateway(t, gateway.Upstream{URL: up}, ""))
	c1 := connectStateless(t, url, "t1-carol-token", nil)
	c2 := connectStateless(t, url, "t2-carol-token", nil)
	call(t, c1, "read_note", map[string]any{"name": "t1"})
	call(t, c2, "read_note", map[string]any{"name": "t2"})
	call(t, c1, "read_note", map[string]any{"name": "t1"})
	a, b := sessionsOf("t1"), sessionsOf("t2")
	if len(a) != 2 || len(b) != 1 || a[0] != a[1] || a[0] == b[0] || a[0] == "" {
		t.Errorf("t1 carol's calls came on %v, t2 carol's on %v", a, b)
	}
}
