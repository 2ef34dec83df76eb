package manifest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/axgate/axgate/manifest"
)

// entryDocs are one manifest with a tool, three resources and a prompt, in
// the v1 form, the reference form and YAML.
var entryDocs = map[string]string{
	"v1": `{"version": "1.0.0", "actions": [
	  {"intent": "payroll.get", "entity": "payroll", "action_type": "read", "description": "Payroll", "operation_id": "payroll"}],
	 "resources": [
	  {"intent": "payroll.file", "entity": "payroll", "description": "The payroll file", "uri": "payroll://all",
	   "required_roles": ["hr"], "rate_limit": "5/minute", "scope": "tenant", "tenant_boundary": "relaxed"},
	  {"intent": "payroll.employee", "entity": "payroll", "description": "One employee", "uri_template": "payroll://employees/{id}", "required_roles": ["hr"]},
	  {"intent": "docs.read", "entity": "docs", "description": "Docs", "uri_prefix": "file:///docs/"}],
	 "prompts": [
	  {"intent": "payroll.summary", "entity": "payroll", "description": "Summarize payroll", "name": "payroll_summary", "required_roles": ["hr"]}]}`,
	"reference": `{"version": "1.0.0", "entities": [
	  {"name": "payroll", "actions": [
	    {"intent": "payroll.get", "action_type": "read", "description": "Payroll", "operation_id": "payroll"}],
	   "resources": [
	    {"intent": "payroll.file", "description": "The payroll file", "uri": "payroll://all",
	     "required_roles": ["hr"], "rate_limit": "5/minute", "scope": "tenant", "tenant_boundary": "relaxed"},
	    {"intent": "payroll.employee", "description": "One employee", "uri_template": "payroll://employees/{id}", "required_roles": ["hr"]}],
	   "prompts": [
	    {"intent": "payroll.summary", "description": "Summarize payroll", "name": "payroll_summary", "required_roles": ["hr"]}]},
	  {"name": "docs", "actions": [], "resources": [{"intent": "docs.read", "description": "Docs", "uri_prefix": "file:///docs/"}]}]}`,
	"yaml": `version: 1.0.0
entities:
  - name: payroll
    actions:
      - {intent: payroll.get, action_type: read, description: Payroll, operation_id: payroll}
    resources:
      - {intent: payroll.file, description: The payroll file, uri: "payroll://all", required_roles: [hr], rate_limit: 5/minute, scope: tenant, tenant_boundary: relaxed}
      - {intent: payroll.employee, description: One employee, uri_template: "payroll://employees/{id}", required_roles: [hr]}
    prompts:
      - {intent: payroll.summary, description: Summarize payroll, name: payroll_summary, required_roles: [hr]}
  - name: docs
    actions: []
    resources:
      - {intent: docs.read, description: Docs, uri_prefix: "file:///docs/"}
`,
}

// TestResourcesAndPromptsLoad: resources and prompts are read in both forms
// with the access fields of an action, as read actions that are no tools.
func TestResourcesAndPromptsLoad(t *testing.T) {
	for name, doc := range entryDocs {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Actions) != 1 || len(m.Resources) != 3 || len(m.Prompts) != 1 {
				t.Fatalf("got %d actions, %d resources, %d prompts", len(m.Actions), len(m.Resources), len(m.Prompts))
			}
			r, _ := m.Resource("payroll://all")
			if r == nil || r.URI != "payroll://all" {
				t.Fatalf("Resource(payroll://all) = %+v", r)
			}
			a := r.Action
			if a.Intent != "payroll.file" || a.Entity != "payroll" || a.Type != manifest.Read || !slices.Equal(a.RequiredRoles, []string{"hr"}) ||
				a.RateLimit == nil || a.RateLimit.Count != 5 || a.Scope != manifest.ScopeTenant || a.TenantBoundary != manifest.TenantRelaxed {
				t.Errorf("the resource's action is %+v", a)
			}
			if a.ToolName() != "" || m.Tool("payroll_file") != nil || m.Action("payroll.file") != nil {
				t.Error("a resource's action must not be a tool")
			}
			p := m.Prompt("payroll_summary")
			if p == nil || p.Action.Intent != "payroll.summary" || p.Action.Entity != "payroll" || p.Action.TenantBoundary != manifest.TenantStrict {
				t.Fatalf("Prompt = %+v", p)
			}
			if m.Prompt("other") != nil {
				t.Error("an undeclared prompt was found")
			}
			if got := len(m.Checked()); got != 5 {
				t.Errorf("Checked() has %d actions; want 5", got)
			}
			if len(m.Tools()) != 1 || len(m.MCPTools()) != 1 {
				t.Error("resources or prompts became tools")
			}
		})
	}
}

// TestResourceMatching: exact URIs, level 1 templates (one segment per
// variable, never a dot segment or an encoded slash) and prefixes (no dot
// segment after them, even encoded); the most specific entry wins.
func TestResourceMatching(t *testing.T) {
	m, err := manifest.Parse([]byte(entryDocs["v1"]))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		uri    string
		intent string
		vars   map[string]string
	}{
		{"payroll://all", "payroll.file", nil},
		{"payroll://all/", "", nil},
		{"PAYROLL://all", "", nil},
		{"payroll://employees/42", "payroll.employee", map[string]string{"id": "42"}},
		{"payroll://employees/a%20b", "payroll.employee", map[string]string{"id": "a b"}},
		{"payroll://employees/", "", nil},
		{"payroll://employees/42/salary", "", nil},
		{"payroll://employees/..", "", nil},
		{"payroll://employees/%2e%2e", "", nil},
		{"payroll://employees/a%2Fb", "", nil},
		{"payroll://employees/a%5Cb", "", nil},
		{"file:///docs/", "docs.read", nil},
		{"file:///docs/a/b.md", "docs.read", nil},
		{"file:///docs/../etc/passwd", "", nil},
		{"file:///docs/a/%2E%2E/%2e%2e/etc/passwd", "", nil},
		{"file:///docs/./x", "", nil},
		{"file:///docs/a%2f..%2f..%2fetc", "", nil},
		{"file:///docs/a\\..\\x", "", nil},
		{"file:///docs/%zz", "", nil},
		{"file:///doc", "", nil},
		{"file:///docs/%252e%252e/etc/passwd", "", nil},
		{"payroll://employees/%252e%252e", "", nil},
		{"payroll://employees/a%252Fb", "", nil},
		{"payroll://employees/%25", "", nil},
		{"file:///etc/passwd", "", nil},
	}
	for _, c := range cases {
		r, vars := m.Resource(c.uri)
		got := ""
		if r != nil {
			got = r.Action.Intent
		}
		if got != c.intent {
			t.Errorf("Resource(%q) is %q; want %q", c.uri, got, c.intent)
			continue
		}
		if len(vars) != len(c.vars) {
			t.Errorf("Resource(%q) vars = %v; want %v", c.uri, vars, c.vars)
		}
		for k, v := range c.vars {
			if vars[k] != v {
				t.Errorf("Resource(%q) vars = %v; want %v", c.uri, vars, c.vars)
			}
		}
	}
}

// TestResourcesAndPromptsStrict: the entries are as strict as every other
// field: unknown fields name their path with a spelling hint, and a
// resource needs exactly one matcher, a level 1 template, unique intents,
// names and matchers.
func TestResourcesAndPromptsStrict(t *testing.T) {
	const tool = `{"intent": "payroll.get", "entity": "payroll", "action_type": "read", "description": "Payroll"}`
	cases := map[string]struct {
		doc  string
		path string
		want string
	}{
		"unknown resource field": {
			`{"version": "1.0.0", "actions": [` + tool + `], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri": "x://y", "requried_roles": ["hr"]}]}`,
			"/resources/0/requried_roles", `unknown field "requried_roles" (did you mean "required_roles"?)`},
		"unknown prompt field": {
			`{"version": "1.0.0", "actions": [` + tool + `], "prompts": [{"intent": "a.b", "entity": "a", "description": "d", "name": "p", "descripton": "x"}]}`,
			"/prompts/0/descripton", `unknown field "descripton" (did you mean "description"?)`},
		"reference unknown field": {
			`{"version": "1.0.0", "entities": [{"name": "a", "actions": [], "resources": [{"intent": "a.b", "description": "d", "uri_prefx": "x://"}]}]}`,
			"/entities/0/resources/0/uri_prefx", `unknown field "uri_prefx" (did you mean "uri_prefix"?)`},
		"reference top-level resources": {
			`{"version": "1.0.0", "entities": [{"name": "a", "actions": []}], "resources": []}`,
			"/resources", `unknown field "resources"`},
		"prompt without name": {
			`{"version": "1.0.0", "actions": [], "prompts": [{"intent": "a.b", "entity": "a", "description": "d"}]}`,
			"/prompts/0/name", `missing required field "name"`},
		"v1 resource without entity": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "description": "d", "uri": "x://y"}]}`,
			"/resources/0/entity", `missing required field "entity"`},
		"no matcher": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d"}]}`,
			"/resources/0", "exactly one of uri, uri_template and uri_prefix"},
		"two matchers": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri": "x://y", "uri_prefix": "x://"}]}`,
			"/resources/0", "exactly one of uri, uri_template and uri_prefix"},
		"level 2 template": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri_template": "file:///{+path}"}]}`,
			"/resources/0/uri_template", "not an RFC 6570 level 1 template"},
		"template without variable": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri_template": "file:///x"}]}`,
			"/resources/0/uri_template", "declare it as uri"},
		"intent of a tool": {
			`{"version": "1.0.0", "actions": [` + tool + `], "prompts": [{"intent": "payroll.get", "entity": "payroll", "description": "d", "name": "p"}]}`,
			"/prompts/0/intent", `intent "payroll.get" is already declared at /actions/0`},
		"two prompts one name": {
			`{"version": "1.0.0", "actions": [], "prompts": [{"intent": "a.b", "entity": "a", "description": "d", "name": "p"}, {"intent": "a.c", "entity": "a", "description": "d", "name": "p"}]}`,
			"/prompts/1/name", `prompt "p" is already declared at /prompts/0`},
		"same resource twice": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri": "x://y"}, {"intent": "a.c", "entity": "a", "description": "d", "uri": "x://y"}]}`,
			"/resources/1", "already declared at /resources/0"},
		"bad rate limit": {
			`{"version": "1.0.0", "actions": [], "prompts": [{"intent": "a.b", "entity": "a", "description": "d", "name": "p", "rate_limit": "often"}]}`,
			"/prompts/0/rate_limit", "is not N/second"},
		"entity differs": {
			`{"version": "1.0.0", "entities": [{"name": "a", "actions": [], "prompts": [{"intent": "b.c", "entity": "b", "description": "d", "name": "p"}]}]}`,
			"/entities/0/prompts/0/entity", "differs from its enclosing entity"},
		"empty uri": {
			`{"version": "1.0.0", "actions": [], "resources": [{"intent": "a.b", "entity": "a", "description": "d", "uri": ""}]}`,
			"/resources/0/uri", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(c.doc))
			me, ok := err.(*manifest.Error)
			if !ok {
				t.Fatalf("err = %v; want a *manifest.Error", err)
			}
			for _, p := range me.Problems {
				if p.Path == c.path && strings.Contains(p.Message, c.want) {
					return
				}
			}
			t.Errorf("no problem at %q saying %q in:\n%v", c.path, c.want, err)
		})
	}
}

// TestResourcePrefixRefusesAnEmptySegment: after a prefix, an empty path
// segment ("//") is refused like a dot segment. The rest of
// file:///docs//etc/passwd is the absolute path /etc/passwd, and an
// upstream that joins the rest to its folder as Python's os.path.join or
// Node's path.resolve do reads /etc/passwd, outside the folder the prefix
// grants. A query or fragment may hold "//".
func TestResourcePrefixRefusesAnEmptySegment(t *testing.T) {
	m, err := manifest.Parse([]byte(entryDocs["v1"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"file:///docs//etc/passwd", "file:///docs/a//b", "file:///docs///etc/passwd"} {
		if r, _ := m.Resource(uri); r != nil {
			t.Errorf("Resource(%q) is %q; want none", uri, r.Action.Intent)
		}
	}
	for _, uri := range []string{"file:///docs/a?next=http://x", "file:///docs/a#//b", "file:///docs/a/"} {
		if r, _ := m.Resource(uri); r == nil {
			t.Errorf("Resource(%q) is none; want docs.read", uri)
		}
	}
}
