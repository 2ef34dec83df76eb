package draft_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/draft"
)

// TestDraftResourcesAndPrompts: manifest init drafts the upstream's
// resources (by exact URI), its level 1 templates and its prompts, as read
// from a go-sdk server's lists, each listed for review; a template the
// manifest cannot declare is left out and listed; the draft loads and
// passes lint at level basic.
func TestDraftResourcesAndPrompts(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "payroll-server", Version: "v1"}, nil)
	read := func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) { return nil, nil }
	s.AddTool(&mcp.Tool{Name: "payroll", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	s.AddResource(&mcp.Resource{URI: "payroll://all", Name: "payroll", Description: "Everyone's salary."}, read)
	s.AddResource(&mcp.Resource{URI: "file:///docs/readme.md", Name: "readme"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "payroll://employees/{id}", Name: "employee"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///{+path}", Name: "files"}, read)
	s.AddPrompt(&mcp.Prompt{Name: "payroll_summary", Description: "Summarize the payroll."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) { return nil, nil })
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "init", Version: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := draft.ListTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	rs, ts, ps, err := draft.ListResourcesAndPrompts(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	m, guesses, out := mustDraft(t, tools, draft.Options{ServerName: "payroll-server", Resources: rs, ResourceTemplates: ts, Prompts: ps})
	if len(m.Resources) != 3 || len(m.Prompts) != 1 || len(m.Actions) != 1 {
		t.Fatalf("drafted %d resources, %d prompts, %d actions:\n%s", len(m.Resources), len(m.Prompts), len(m.Actions), out)
	}
	if r, _ := m.Resource("payroll://all"); r == nil || r.Action.Description != "Everyone's salary." || r.Action.Intent == "payroll.payroll" {
		t.Errorf("payroll://all drafted as %+v", r)
	}
	if r, vars := m.Resource("payroll://employees/7"); r == nil || vars["id"] != "7" {
		t.Errorf("the template is not drafted: %v", r)
	}
	if r, _ := m.Resource("file:///etc/passwd"); r != nil {
		t.Errorf("a level 2 template was drafted as %+v", r)
	}
	if p := m.Prompt("payroll_summary"); p == nil || p.Action.Description != "Summarize the payroll." {
		t.Errorf("the prompt is not drafted: %+v", p)
	}
	var text strings.Builder
	for _, g := range guesses {
		text.WriteString(g.String() + "\n")
	}
	for _, want := range []string{
		"resource payroll://all: /entities/0/resources/1: drafted for every caller",
		"resource file:///docs/readme.md: /entities/0/resources/0/description",
		"template payroll://employees/{id}: /entities/0/resources/2: drafted for every caller",
		"template file:///{+path}: /entities/0/resources: not drafted",
		"prompt payroll_summary: /entities/0/prompts/0: drafted for every caller",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no guess %q in:\n%s", want, text.String())
		}
	}
}
