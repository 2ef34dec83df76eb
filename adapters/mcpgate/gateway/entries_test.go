package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResourcePrefixEmptySegmentNeverForwarded: a read under a declared
// prefix whose rest starts with "/" (payroll://files//etc/passwd, the
// absolute path /etc/passwd to an upstream that joins it to its folder as
// os.path.join does) is refused with AXAG_INTENT_NOT_FOUND and never
// reaches the upstream.
func TestResourcePrefixEmptySegmentNeverForwarded(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	doc := strings.Replace(string(payrollManifest), `"resources": [`,
		`"resources": [{"intent": "payroll.files", "entity": "payroll", "description": "Payroll files.", "uri_prefix": "payroll://files/", "required_roles": ["hr"]},`, 1)
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	hana := connect(t, serve(t, g), "hana-token", nil)
	for _, uri := range []string{"payroll://files//etc/passwd", "payroll://files/a//etc/passwd"} {
		_, err := hana.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err == nil || axagData(t, err).Code != "AXAG_INTENT_NOT_FOUND" {
			t.Errorf("read %s: %v; want AXAG_INTENT_NOT_FOUND", uri, err)
		}
	}
	if got := up.saw("resources/read"); len(got) != 0 {
		t.Errorf("the upstream received %v", got)
	}
}

// TestPromptEmbeddedResourcesFiltered: a prompt the caller may get whose
// messages embed resources (as a prompt that takes a URI argument does)
// reaches the client without the contents of URIs the manifest does not
// declare or the caller may not read: the same rule as a read's answer.
func TestPromptEmbeddedResourcesFiltered(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	up.server.AddPrompt(&mcp.Prompt{Name: "brief"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "Brief me."}},
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "payroll://all", Text: salaries}}},
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "secret://keys", Text: "the keys"}}},
		}}, nil
	})
	doc := strings.Replace(string(payrollManifest), `"prompts": [`,
		`"prompts": [{"intent": "brief.get", "entity": "payroll", "description": "A brief.", "name": "brief"},`, 1)
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	eve := connect(t, serve(t, g), "eve-token", nil)
	res, err := eve.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "brief"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Messages {
		if e, ok := m.Content.(*mcp.EmbeddedResource); ok {
			t.Errorf("eve got the embedded %s: %q", e.Resource.URI, e.Resource.Text)
		}
	}
	if len(res.Messages) != 1 {
		t.Errorf("eve got %d messages; want the text alone", len(res.Messages))
	}
}

// TestCompletionOfATenantArgumentListsOnlyTheCallersTenant: completing
// the tenant variable of a tenant-scoped template (or a prompt's tenant
// argument) answers only with values the caller may name: eve of t1, who
// may complete t1's employees, does not learn that tenant t2 exists.
func TestCompletionOfATenantArgumentListsOnlyTheCallersTenant(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "tenants", Version: "v1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"t1", "t1-archive", "t2"}, Total: 3}}, nil
		},
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: salaries}}}, nil
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "payroll://{tenant_id}/employees/{id}", Name: "employee"}, read)
	s.AddPrompt(&mcp.Prompt{Name: "team", Arguments: []*mcp.PromptArgument{{Name: "tenant_id"}}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "team"}}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	doc := []byte(`{"version": "1.0.0", "actions": [],
 "resources": [{"intent": "employee.read", "entity": "employee", "description": "An employee of the caller's tenant.",
   "uri_template": "payroll://{tenant_id}/employees/{id}", "scope": "tenant"}],
 "prompts": [{"intent": "team.prompt", "entity": "employee", "description": "The caller's team.", "name": "team", "scope": "tenant"}]}`)
	g := newGatewayFor(t, doc, gateway.Upstream{URL: hs.URL})
	eve := connect(t, serve(t, g), "eve-token", nil)
	for what, ref := range map[string]*mcp.CompleteReference{
		"template": {Type: "ref/resource", URI: "payroll://{tenant_id}/employees/{id}"},
		"prompt":   {Type: "ref/prompt", Name: "team"},
	} {
		res, err := eve.Complete(context.Background(), &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "tenant_id", Value: "t1"}})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := res.Completion.Values; !slices.Equal(got, []string{"t1"}) {
			t.Errorf("%s: eve of t1 completed the tenant with %v; want [t1]", what, got)
		}
	}
}

// entryRequests are the requests about the payroll's data besides its
// tool, as a client sends them; each returns its result's text.
var entryRequests = map[string]func(context.Context, *mcp.ClientSession) (string, error){
	"resources/read payroll://all": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://all"})
		if err != nil {
			return "", err
		}
		return r.Contents[0].Text, nil
	},
	"resources/read payroll://employees/alice": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://employees/alice"})
		if err != nil {
			return "", err
		}
		return r.Contents[0].Text, nil
	},
	"prompts/get payroll_summary": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		r, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "payroll_summary", Arguments: map[string]string{"employee": "alice"}})
		if err != nil {
			return "", err
		}
		return r.Messages[0].Content.(*mcp.TextContent).Text, nil
	},
	"completion/complete payroll_summary": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		r, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "payroll_summary"},
			Argument: mcp.CompleteParamsArgument{Name: "employee", Value: "a"}})
		if err != nil {
			return "", err
		}
		return strings.Join(r.Completion.Values, ""), nil
	},
	"completion/complete payroll://employees/{id}": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		r, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "payroll://employees/{id}"},
			Argument: mcp.CompleteParamsArgument{Name: "id", Value: "a"}})
		if err != nil {
			return "", err
		}
		return strings.Join(r.Completion.Values, ""), nil
	},
	"resources/subscribe payroll://all": func(ctx context.Context, cs *mcp.ClientSession) (string, error) {
		return salaries, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "payroll://all"})
	},
}

// undeclaredRequests ask for what the manifest does not declare.
var undeclaredRequests = map[string]func(context.Context, *mcp.ClientSession) error{
	"resources/read secret://keys": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "secret://keys"})
		return err
	},
	"resources/read secret://x": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "secret://x"})
		return err
	},
	"resources/read payroll://employees/..": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://employees/.."})
		return err
	},
	"prompts/get exfiltrate": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "exfiltrate"})
		return err
	},
	"completion/complete exfiltrate": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "exfiltrate"}, Argument: mcp.CompleteParamsArgument{Name: "x"}})
		return err
	},
	"completion/complete secret://{name}": func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "secret://{name}"}, Argument: mcp.CompleteParamsArgument{Name: "name"}})
		return err
	},
	"resources/subscribe secret://keys": func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "secret://keys"})
	},
	"resources/unsubscribe secret://keys": func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "secret://keys"})
	},
}

// TestResourcesPromptsUnderPolicy: the payroll's data is refused to a
// caller without the HR role on every way besides the tool (listing hides
// it; read, get, complete and subscribe are refused with
// AXAG_ROLE_INSUFFICIENT and never reach the upstream), and reaches a
// caller with the role; what the manifest does not declare is refused
// with AXAG_INTENT_NOT_FOUND and never forwarded; on the HTTP front and
// the stdio front.
func TestResourcesPromptsUnderPolicy(t *testing.T) {
	t.Parallel()
	fronts := map[string]func(t *testing.T, up *payroll, upURL string, token string) *mcp.ClientSession{
		"http": func(t *testing.T, _ *payroll, upURL, token string) *mcp.ClientSession {
			g := newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL})
			return connect(t, serve(t, g), token, nil)
		},
		"stdio": func(t *testing.T, _ *payroll, upURL, token string) *mcp.ClientSession {
			g := newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL}, gateway.WithLocalPrincipal(principals[token]))
			return localSession(t, g, nil)
		},
	}
	for name, open := range fronts {
		t.Run(name, func(t *testing.T) {
			up, upURL := payrollUpstream(t)
			ctx := context.Background()

			eve := open(t, up, upURL, "eve-token")
			if caps := eve.InitializeResult().Capabilities; caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil {
				t.Errorf("the front does not announce what the manifest declares: %+v", caps)
			}
			if got := listed(t, eve); len(got) != 0 {
				t.Errorf("eve is listed %v", got)
			}
			if res := call(t, eve, "payroll", map[string]any{}); !res.IsError {
				t.Errorf("eve called the payroll tool: %s", text(res))
			}
			for what, do := range entryRequests {
				got, err := do(ctx, eve)
				if err == nil {
					t.Errorf("%s: eve got %q", what, got)
					continue
				}
				if r := axagData(t, err); r.Code != "AXAG_ROLE_INSUFFICIENT" {
					t.Errorf("%s: eve refused with %+v; want AXAG_ROLE_INSUFFICIENT", what, r)
				}
			}
			for what, do := range undeclaredRequests {
				if r := axagData(t, do(ctx, eve)); r.Code != "AXAG_INTENT_NOT_FOUND" {
					t.Errorf("%s: eve refused with %+v; want AXAG_INTENT_NOT_FOUND", what, r)
				}
			}
			for _, m := range []string{"resources/read", "prompts/get", "completion/complete", "resources/subscribe", "resources/unsubscribe", "tools/call"} {
				if got := up.saw(m); len(got) != 0 {
					t.Errorf("the upstream saw eve's %v", got)
				}
			}

			hana := open(t, up, upURL, "hana-token")
			want := []string{"prompt payroll_summary", "resource payroll://all Everyone's salary, as a file.", "template payroll://employees/{id}"}
			if got := listed(t, hana); !slices.Equal(got, want) {
				t.Errorf("hana is listed %v; want %v", got, want)
			}
			for what, do := range entryRequests {
				got, err := do(ctx, hana)
				if err != nil || got != salaries {
					t.Errorf("%s: hana got %q, %v", what, got, err)
				}
			}
			for what, do := range undeclaredRequests {
				if r := axagData(t, do(ctx, hana)); r.Code != "AXAG_INTENT_NOT_FOUND" {
					t.Errorf("%s: hana refused with %+v; want AXAG_INTENT_NOT_FOUND", what, r)
				}
			}
			for _, r := range append(up.saw("resources/read"), append(up.saw("prompts/get"), up.saw("resources/subscribe")...)...) {
				if strings.Contains(r, "secret") || strings.Contains(r, "exfiltrate") || strings.Contains(r, "..") {
					t.Errorf("the upstream saw %s", r)
				}
			}
			if n := len(up.saw("resources/read")); n != 2 {
				t.Errorf("the upstream saw %d reads; want hana's 2", n)
			}
		})
	}
}

// TestResourcesRawPostNeverForwarded: raw JSON-RPC on an established
// streamable HTTP session (where the direct path takes tools/calls), under
// every method name that could reach the payroll's data, reaches the
// upstream with none of it for a caller without the role, nor anything the
// manifest does not declare.
func TestResourcesRawPostNeverForwarded(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	g := newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL})
	url := serve(t, g)
	session, version := initializeRaw(t, url, "eve-token", "2025-11-25")
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"payroll://all"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"payroll://employees/alice"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"secret://keys"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"payroll_summary"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"exfiltrate"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"payroll_summary"},"argument":{"name":"employee","value":"a"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"payroll://employees/{id}","name":"exfiltrate"},"argument":{"name":"id","value":"a"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"resources/subscribe","params":{"uri":"payroll://all"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"resources/unsubscribe","params":{"uri":"secret://keys"}}`,
		`{"jsonrpc":"2.0","id":10,"method":"Resources/Read","params":{"uri":"payroll://all"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"resources/read ","params":{"uri":"payroll://all"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"payroll","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"resources/read","arguments":{"uri":"payroll://all"}}}`,
		`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"payroll_file","arguments":{}}}`,
		`[{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"payroll://all"}}]`,
	}
	for _, body := range bodies {
		status, _, msg := postCall(t, url, "eve-token", session, version, body)
		if status == 200 && msg["error"] == nil {
			if res, _ := msg["result"].(map[string]any); res["isError"] != true {
				t.Errorf("%s: answered %v", body, msg)
			}
		}
	}
	for _, m := range []string{"resources/read", "prompts/get", "completion/complete", "resources/subscribe", "resources/unsubscribe", "tools/call"} {
		if got := up.saw(m); len(got) != 0 {
			t.Errorf("the upstream saw %v", got)
		}
	}
}

// TestResourceContentsFiltered: a read answered with the contents of other
// URIs besides the one asked for (as a folder's read may be) reaches the
// client with only those the manifest declares and the caller may read;
// and a subscriber hears of updates to what it subscribed.
func TestResourceContentsFiltered(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	up.server.AddResource(&mcp.Resource{URI: "payroll://employees/bob", Name: "bob"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: "payroll://employees/bob", Text: "bob: 95000"},
				{URI: "secret://keys", Text: "the keys"},
				{URI: "payroll://all", Text: salaries},
			}}, nil
		})
	doc := strings.Replace(string(payrollManifest), `"uri": "payroll://all", "required_roles": ["hr"]`, `"uri": "payroll://all", "required_roles": ["admin"]`, 1)
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	updated := make(chan string, 1)
	hana := connect(t, serve(t, g), "hana-token", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	ctx := context.Background()
	res, err := hana.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://employees/bob"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != "payroll://employees/bob" {
		t.Errorf("hana read %+v", res.Contents)
	}
	if err := hana.Subscribe(ctx, &mcp.SubscribeParams{URI: "payroll://employees/bob"}); err != nil {
		t.Fatal(err)
	}
	if err := up.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "payroll://employees/bob"}); err != nil {
		t.Fatal(err)
	}
	if got := <-updated; got != "payroll://employees/bob" {
		t.Errorf("hana heard of %s", got)
	}
}

// TestResourcesRateLimitedAndOnePage: a declared resource's rate_limit is
// enforced as a read action's (AXAG_RATE_LIMITED, not forwarded), and a
// client's cursor pages into nothing: the lists are one page.
func TestResourcesRateLimitedAndOnePage(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	doc := strings.Replace(string(payrollManifest), `"uri_template": "payroll://employees/{id}", "required_roles": ["hr"]`,
		`"uri_template": "payroll://employees/{id}", "required_roles": ["hr"], "rate_limit": "1/hour"`, 1)
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	hana := connect(t, serve(t, g), "hana-token", nil)
	ctx := context.Background()
	if _, err := hana.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://employees/alice"}); err != nil {
		t.Fatal(err)
	}
	_, err := hana.ReadResource(ctx, &mcp.ReadResourceParams{URI: "payroll://employees/bob"})
	if r := axagData(t, err); r.Code != "AXAG_RATE_LIMITED" {
		t.Errorf("a second read within the hour: %+v; want AXAG_RATE_LIMITED", r)
	}
	if got := up.saw("resources/read"); len(got) != 1 {
		t.Errorf("the upstream saw %v; want the first read only", got)
	}
	rs, err := hana.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "secret://"})
	if err != nil || len(rs.Resources) != 0 || rs.NextCursor != "" {
		t.Errorf("a page after the first: %+v, %v", rs, err)
	}
	ps, err := hana.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: "1"})
	if err != nil || len(ps.Prompts) != 0 {
		t.Errorf("a page of prompts after the first: %+v, %v", ps, err)
	}
}

// TestNoDeclarationsServesToolsOnly: a manifest that declares no resources
// or prompts gets a gateway that serves tools only, as --tools-only did:
// nothing else announced, listed or forwarded.
func TestNoDeclarationsServesToolsOnly(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	doc := `{"version": "1.0.0", "actions": [{"intent": "payroll.get", "entity": "payroll", "action_type": "read", "operation_id": "payroll",
	  "description": "Everyone's salary.", "required_roles": ["hr"], "scope": "global"}]}`
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	hana := connect(t, serve(t, g), "hana-token", nil)
	if caps := hana.InitializeResult().Capabilities; caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil {
		t.Errorf("announces %+v", caps)
	}
	if got := listed(t, hana); len(got) != 0 {
		t.Errorf("listed %v", got)
	}
	for what, do := range entryRequests {
		if _, err := do(context.Background(), hana); err == nil || axagData(t, err).Code != "AXAG_INTENT_NOT_FOUND" {
			t.Errorf("%s: %v; want AXAG_INTENT_NOT_FOUND", what, err)
		}
	}
	if res := call(t, hana, "payroll", map[string]any{}); res.IsError {
		t.Errorf("the tool: %s", text(res))
	}
	for _, m := range []string{"resources/list", "resources/templates/list", "prompts/list", "resources/read", "prompts/get", "completion/complete", "resources/subscribe"} {
		if got := up.saw(m); len(got) != 0 {
			t.Errorf("the upstream saw %v", got)
		}
	}
}
