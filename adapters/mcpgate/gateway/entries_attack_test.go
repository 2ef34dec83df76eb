package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestResourcePrefixEmptySegmentNeverForwarded: a read under a declared
// prefix whose rest starts with "/" (payroll://files//etc/passwd, the
// absolute path /etc/passwd to an upstream that joins it to its folder as
// os.path.join does) is refused with AXAG_INTENT_NOT_FOUND and never
// reaches the upstream.
func TestResourcePrefixEmptySegmentNeverForwarded(t *testing.T) {
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
