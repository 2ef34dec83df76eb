package draft_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/lint"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/draft"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// loadAndLint checks what every draft must be: a manifest that loads,
// passes lint at level basic without errors, and builds an enforcer.
func loadAndLint(t *testing.T, out []byte) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse(out)
	if err != nil {
		t.Fatalf("the draft does not load: %v\n%s", err, out)
	}
	r := lint.Lint(out, lint.LintOptions{Level: lint.LevelBasic})
	if !r.Passed() {
		t.Fatalf("the draft fails lint at level basic: %v\n%s", r.Errors(), out)
	}
	for _, w := range r.Warnings() {
		t.Logf("lint warning: %s", w)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatalf("no enforcer for the draft: %v", err)
	}
	enf.Close()
	return m
}

func mustDraft(t *testing.T, tools []*mcp.Tool, opts draft.Options) (*manifest.Manifest, []draft.Guess, []byte) {
	t.Helper()
	out, guesses, err := draft.Draft(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	return loadAndLint(t, out), guesses, out
}

// guessed returns the guesses at pointers ending in suffix.
func guessed(gs []draft.Guess, suffix string) []draft.Guess {
	var out []draft.Guess
	for _, g := range gs {
		if strings.HasSuffix(g.Pointer, suffix) {
			out = append(out, g)
		}
	}
	return out
}

func obj() map[string]any { return map[string]any{"type": "object", "properties": map[string]any{}} }

// TestDraftSafety: the safety fields follow the annotations as the package
// documentation says, and each is listed as a guess exactly when it does not
// follow from what the upstream states.
func TestDraftSafety(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name        string
		ann         *mcp.ToolAnnotations
		typ, risk   string
		confirm     bool
		idempotent  *bool
		guessedType bool
	}{
		{"no annotations", nil, "write", "high", true, &no, true},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true}, "read", "low", false, nil, false},
		{"read-only beats destructive", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, "read", "low", false, nil, false},
		{"write, hints at their defaults", &mcp.ToolAnnotations{}, "write", "high", true, &no, false},
		{"destructive idempotent", &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}, "write", "high", true, &yes, false},
		{"additive, open world", &mcp.ToolAnnotations{DestructiveHint: &no}, "write", "high", true, &no, false},
		{"additive, closed world", &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no, IdempotentHint: true}, "write", "medium", false, &yes, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, gs, _ := mustDraft(t, []*mcp.Tool{{Name: "do_it", Description: "Does it", InputSchema: obj(), Annotations: c.ann}}, draft.Options{Entity: "thing"})
			a := m.Tool("do_it")
			if string(a.Type) != c.typ || string(a.RiskLevel) != c.risk || a.ConfirmationRequired != c.confirm {
				t.Errorf("drafted %s, %s risk, confirmation %v; want %s, %s, %v", a.Type, a.RiskLevel, a.ConfirmationRequired, c.typ, c.risk, c.confirm)
			}
			if (a.Idempotent == nil) != (c.idempotent == nil) || (a.Idempotent != nil && *a.Idempotent != *c.idempotent) {
				t.Errorf("idempotent %v; want %v", a.Idempotent, c.idempotent)
			}
			if len(guessed(gs, "/risk_level")) != 1 || len(guessed(gs, "/confirmation_required")) != 1 {
				t.Errorf("risk_level and confirmation_required are always guesses: %v", gs)
			}
			if got := len(guessed(gs, "/action_type")) == 1; got != c.guessedType {
				t.Errorf("action_type listed as a guess: %v; want %v", got, c.guessedType)
			}
			if got := len(guessed(gs, "/idempotent")) == 1; got != c.guessedType {
				t.Errorf("idempotent listed as a guess: %v; want %v", got, c.guessedType)
			}
			for _, g := range gs {
				if g.Why == "" || g.Pointer == "" || g.Tool != "do_it" || g.Intent != "thing.do_it" {
					t.Errorf("guess %+v lacks its tool, intent, pointer or reason", g)
				}
			}
		})
	}
}

// TestDraftParameters: each keyword of an input schema the manifest can
// express is kept, the rest is left out and listed at its pointer, and the
// enforced schema accepts what the upstream's accepts in the common case.
func TestDraftParameters(t *testing.T) {
	schema := json.RawMessage(`{
	  "type": "object",
	  "$defs": {"tag": {"type": "string", "maxLength": 20, "pattern": "^[a-z]+$"}},
	  "required": ["path", "mode", "ghost"],
	  "additionalProperties": true,
	  "properties": {
	    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "format": "uri-reference"},
	    "mode": {"enum": ["r", "w"], "default": "r"},
	    "level": {"const": 3},
	    "count": {"type": "integer", "exclusiveMinimum": 0, "maximum": 100, "multipleOf": 5},
	    "ratio": {"type": "number", "exclusiveMaximum": 1, "minimum": 0},
	    "old": {"type": "integer", "minimum": 1, "exclusiveMinimum": true},
	    "when": {"type": ["string", "null"], "format": "date-time"},
	    "either": {"type": ["string", "number"]},
	    "maybe": {"anyOf": [{"type": "integer", "minimum": 2}, {"type": "null"}]},
	    "choice": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
	    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "minItems": 1, "maxItems": 5, "uniqueItems": true},
	    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
	    "lookahead": {"type": "string", "pattern": "^(?=a)a$"},
	    "nested": {"type": "object", "required": ["x"], "properties": {"x": {"type": "number", "description": "X"}, "y": {"type": "boolean"}}},
	    "free": {"type": "object", "additionalProperties": {"type": "string"}},
	    "anything": {},
	    "wrong": {"type": "string", "minimum": 3},
	    "impossible": {"type": "integer", "minimum": 5, "maximum": 1},
	    "a/b~c": {"type": "string", "x-vendor": 1, "title": "T", "examples": ["e"]},
	    "broken": {"$ref": "#/$defs/none"}
	  }
	}`)
	m, gs, out := mustDraft(t, []*mcp.Tool{{Name: "put", Description: "Puts", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}}, draft.Options{Entity: "store"})
	var doc struct {
		Entities []struct {
			Actions []struct {
				Parameters map[string]json.RawMessage `json:"parameters"`
			} `json:"actions"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	params := doc.Entities[0].Actions[0].Parameters
	want := map[string]string{
		"path":       `{"type":"string","required":true,"minLength":1,"maxLength":4096}`,
		"mode":       `{"type":"string","required":true,"enum":["r","w"],"default":"r"}`,
		"level":      `{"type":"integer","enum":[3]}`,
		"count":      `{"type":"integer","minimum":1,"maximum":100}`,
		"ratio":      `{"type":"number","minimum":0,"maximum":1}`,
		"old":        `{"type":"integer","minimum":2}`,
		"when":       `{"type":"string","format":"date-time"}`,
		"either":     `{"type":"string"}`,
		"maybe":      `{"type":"integer","minimum":2}`,
		"choice":     `{"type":"string"}`,
		"tags":       `{"type":"array","items":{"type":"string","maxLength":20,"pattern":"^[a-z]+$"},"maxItems":5}`,
		"pair":       `{"type":"array"}`,
		"lookahead":  `{"type":"string"}`,
		"nested":     `{"type":"object","properties":{"x":{"type":"number","required":true,"description":"X"},"y":{"type":"boolean"}}}`,
		"free":       `{"type":"object"}`,
		"anything":   `{"type":"string"}`,
		"wrong":      `{"type":"string"}`,
		"impossible": `{"type":"integer"}`,
		"a/b~c":      `{"type":"string"}`,
		"broken":     `{"type":"string"}`,
	}
	for name, w := range want {
		var got any
		if err := json.Unmarshal(params[name], &got); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		g, _ := json.Marshal(got)
		var wv any
		if err := json.Unmarshal([]byte(w), &wv); err != nil {
			t.Fatal(err)
		}
		ws, _ := json.Marshal(wv)
		if string(g) != string(ws) {
			t.Errorf("%s drafted as %s; want %s", name, g, ws)
		}
	}
	if len(params) != len(want) {
		t.Errorf("%d parameters drafted; want %d", len(params), len(want))
	}
	p := "/entities/0/actions/0/parameters"
	listed := []string{
		p,                                // additionalProperties true
		p + "/ghost",                     // required, not a property
		p + "/path/format",               // uri-reference
		p + "/count/multipleOf",          //
		p + "/ratio/exclusiveMaximum",    // a number's exclusive bound
		p + "/when/type",                 // null dropped
		p + "/either/type",               // a union
		p + "/maybe",                     // anyOf with null
		p + "/choice",                    // oneOf of two
		p + "/tags/minItems",             //
		p + "/tags/uniqueItems",          //
		p + "/pair/items",                // a tuple
		p + "/lookahead/pattern",         // not RE2
		p + "/anything/type",             // no type
		p + "/wrong/minimum",             // does not apply to a string
		p + "/impossible",                // minimum above maximum
		p + "/broken/$ref",               // dangling
		p + "/broken/type",               // and so untyped
		p + "/free",                      // nothing: an object without properties is open
		p + "/a~1b~0c",                   // nothing: annotations and x- are silent
		p + "/nested/properties/x/type",  // nothing
		p + "/old/exclusiveMinimum",      // nothing: an integer's bound is exact
		p + "/count/exclusiveMinimum",    // nothing
		p + "/tags/items/pattern",        // nothing
		p + "/mode/type",                 // nothing: the enum says string
		p + "/level/type",                // nothing: the const says integer
		p + "/nested/properties/y/title", // nothing
	}
	silent := listed[18:]
	for _, ptr := range listed[:18] {
		if !slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Pointer == ptr }) {
			t.Errorf("nothing listed at %s", ptr)
		}
	}
	for _, ptr := range silent {
		if slices.ContainsFunc(gs, func(g draft.Guess) bool { return strings.HasPrefix(g.Pointer, ptr) }) {
			t.Errorf("a guess at %s, where the draft is exact", ptr)
		}
	}
	if t.Failed() {
		for _, g := range gs {
			t.Log(g)
		}
	}

	// The enforced schema takes an ordinary call and refuses what the
	// draft says it refuses.
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	run := func(args string) error {
		return enf.Check(context.Background(), middleware.NewCall("put", json.RawMessage(args), middleware.Principal{ID: "p"}))
	}
	if err := run(`{"path": "a/b", "mode": "w", "count": 5, "tags": ["x"], "nested": {"x": 1}}`); err != nil {
		t.Errorf("an ordinary call refused: %v", err)
	}
	for _, bad := range []string{
		`{"path": "a", "mode": "x"}`,
		`{"path": "a", "mode": "r", "count": 0}`,
		`{"path": "a", "mode": "r", "surplus": 1}`,
		`{"path": "a", "mode": "r", "tags": ["UP"]}`,
	} {
		if run(bad) == nil {
			t.Errorf("%s allowed", bad)
		}
	}
}

// TestDraftOpenAndClosedArguments: an input schema without properties
// leaves the arguments open (listed), one that allows no members allows
// none, one with empty properties declares no parameters.
func TestDraftOpenAndClosedArguments(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "open", Description: "Open", InputSchema: map[string]any{"type": "object"}},
		{Name: "closed", Description: "Closed", InputSchema: map[string]any{"type": "object", "additionalProperties": false}},
		{Name: "empty", Description: "Empty", InputSchema: map[string]any{"type": "object", "properties": map[string]any{}}},
		{Name: "none", Description: "None"},
	}
	m, gs, _ := mustDraft(t, tools, draft.Options{Entity: "x"})
	if m.Tool("open").ParametersDeclared || m.Tool("none").ParametersDeclared {
		t.Error("an input schema without properties declared parameters")
	}
	if !m.Tool("closed").ParametersDeclared || !m.Tool("empty").ParametersDeclared {
		t.Error("an input schema that allows no members left the arguments open")
	}
	for i, open := range []bool{true, false, false, true} {
		ptr := "/entities/0/actions/" + string(rune('0'+i)) + "/parameters"
		if got := slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Pointer == ptr }); got != open {
			t.Errorf("%s listed: %v; want %v", tools[i].Name, got, open)
		}
	}
}

// TestDraftRecursiveSchema: a schema that refers to itself is cut at a
// depth, said so, and still loads.
func TestDraftRecursiveSchema(t *testing.T) {
	schema := json.RawMessage(`{"type": "object", "$defs": {"node": {"type": "object", "properties": {
	  "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
	  "properties": {"root": {"$ref": "#/$defs/node"}, "loop": {"$ref": "#/$defs/a"}},
	  "definitions": {}}`)
	var raw map[string]any
	if err := json.Unmarshal(schema, &raw); err != nil {
		t.Fatal(err)
	}
	raw["$defs"].(map[string]any)["a"] = map[string]any{"$ref": "#/$defs/b"}
	raw["$defs"].(map[string]any)["b"] = map[string]any{"$ref": "#/$defs/a"}
	_, gs, _ := mustDraft(t, []*mcp.Tool{{Name: "tree", Description: "Tree", InputSchema: raw}}, draft.Options{Entity: "x"})
	if !slices.ContainsFunc(gs, func(g draft.Guess) bool { return strings.Contains(g.Why, "nested deeper") }) {
		t.Errorf("the cut is not listed: %v", gs)
	}
	if !slices.ContainsFunc(gs, func(g draft.Guess) bool { return strings.HasSuffix(g.Pointer, "/loop/$ref") }) {
		t.Errorf("the $ref loop is not listed: %v", gs)
	}
}

// TestDraftNames: intents are the entity and the tool name as a lowercase
// name, renamed and numbered ones listed; the tool binding keeps the exact
// name; names the manifest cannot bind are left out and listed.
func TestDraftNames(t *testing.T) {
	tool := func(name string) *mcp.Tool {
		return &mcp.Tool{Name: name, Description: "d", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	}
	long := strings.Repeat("a", 129)
	m, gs, _ := mustDraft(t, []*mcp.Tool{tool("read_file"), tool("readFile"), tool("read-file"), tool("get.v2"), tool("has space"), tool(long), tool("9lives")},
		draft.Options{ServerName: "mcp-server-github"})
	want := map[string]string{
		"read_file": "github.read_file", "readFile": "github.read_file_2", "read-file": "github.read_file_3",
		"get.v2": "github.get_v2", "9lives": "github.tool_9lives",
	}
	for tool, intent := range want {
		a := m.Tool(tool)
		if a == nil || a.Intent != intent {
			t.Errorf("tool %s: action %+v; want intent %s", tool, a, intent)
		}
	}
	if len(m.Actions) != len(want) {
		t.Errorf("%d actions; want %d", len(m.Actions), len(want))
	}
	for _, name := range []string{"has space", long} {
		if !slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Tool == name && strings.HasPrefix(g.Why, "not drafted") }) {
			t.Errorf("%q left out without a word", name)
		}
	}
	for _, ptr := range []string{"/entities/0/name", "/entities/0/actions/1/intent", "/entities/0/actions/2/intent", "/entities/0/actions/3/intent", "/entities/0/actions/4/intent"} {
		if !slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Pointer == ptr }) {
			t.Errorf("nothing listed at %s", ptr)
		}
	}
	if slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Pointer == "/entities/0/actions/0/intent" }) {
		t.Error("an intent that is the tool name is listed")
	}
	// The same tools with an entity given: the entity is not a guess.
	_, gs, _ = mustDraft(t, []*mcp.Tool{tool("a")}, draft.Options{Entity: "gh"})
	if slices.ContainsFunc(gs, func(g draft.Guess) bool { return g.Pointer == "/entities/0/name" }) {
		t.Error("an entity given is listed as a guess")
	}
}

func TestIntentAndEntityName(t *testing.T) {
	for in, want := range map[string]string{
		"read_file": "read_file", "readFile": "read_file", "read-file": "read_file", "ReadFile": "read_file",
		"HTTPGet": "httpget", "get.v2": "get_v2", "__x__": "x", "9lives": "tool_9lives", "": "tool", "-": "tool",
		"über": "ber", "a--b": "a_b",
	} {
		if got := draft.IntentName(in); got != want {
			t.Errorf("IntentName(%q) = %q; want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"secure-filesystem-server": "secure_filesystem", "mcp-server-github": "github", "Everything": "everything",
		"mcp": "upstream", "": "upstream", "42": "upstream", "server-mcp-tool": "upstream", "my server 2": "my_server_2",
	} {
		if got := draft.EntityName(in); got != want {
			t.Errorf("EntityName(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestDraftDocument: the options shape the document, the pins are the
// tools' digests, and a tool without a description gets one (listed).
func TestDraftDocument(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "a", Description: "A", InputSchema: obj()},
		{Name: "b", Title: "Bee", InputSchema: obj()},
		{Name: "c", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{Title: "Sea"}},
		{Name: "d", InputSchema: obj()},
	}
	at := time.Date(2026, 9, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	m, gs, _ := mustDraft(t, tools, draft.Options{
		Entity: "e", Version: "2.0.0", GeneratedAt: at,
		Source:   &manifest.Source{URL: "http://127.0.0.1:9/mcp", Tool: "axgate manifest init", ToolVersion: "0.1.0"},
		Metadata: map[string]any{"upstream": map[string]any{"name": "srv"}},
	})
	if m.Version != "2.0.0" || m.GeneratedAt != "2026-09-01T11:00:00Z" || m.Conformance != "basic" || m.Form != manifest.FormReference {
		t.Errorf("document %s %s %s %s", m.Version, m.GeneratedAt, m.Conformance, m.Form)
	}
	if m.Source == nil || m.Source.URL != "http://127.0.0.1:9/mcp" || m.Metadata["upstream"] == nil {
		t.Errorf("source %+v, metadata %v", m.Source, m.Metadata)
	}
	for i, tool := range tools {
		want, err := mcpgate.ToolDigest(tool)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Tool(tool.Name).UpstreamSHA256; got != want {
			t.Errorf("%s pinned %s; want its digest %s", tool.Name, got, want)
		}
		desc := m.Tool(tool.Name).Description
		listed := slices.ContainsFunc(gs, func(g draft.Guess) bool {
			return g.Pointer == "/entities/0/actions/"+string(rune('0'+i))+"/description"
		})
		if listed != (tool.Description == "") || desc == "" {
			t.Errorf("%s: description %q, listed %v", tool.Name, desc, listed)
		}
	}
	if d := m.Tool("b").Description; !strings.Contains(d, "Bee") {
		t.Errorf("b's description %q does not use its title", d)
	}
	if d := m.Tool("c").Description; !strings.Contains(d, "Sea") {
		t.Errorf("c's description %q does not use its annotations' title", d)
	}
	out, _, err := draft.Draft(nil, draft.Options{Entity: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if m := loadAndLint(t, out); len(m.Actions) != 0 {
		t.Errorf("no tools drafted %d actions", len(m.Actions))
	}
}

// TestDraftRefuses: no draft of what is not a list of tools, or with an
// entity that would not load.
func TestDraftRefuses(t *testing.T) {
	ok := &mcp.Tool{Name: "a", InputSchema: obj()}
	for name, c := range map[string]struct {
		tools []*mcp.Tool
		opts  draft.Options
	}{
		"nil tool":     {[]*mcp.Tool{ok, nil}, draft.Options{}},
		"no name":      {[]*mcp.Tool{{InputSchema: obj()}}, draft.Options{}},
		"twice":        {[]*mcp.Tool{ok, {Name: "a", InputSchema: obj()}}, draft.Options{}},
		"bad schema":   {[]*mcp.Tool{{Name: "b", InputSchema: json.RawMessage(`{`)}}, draft.Options{}},
		"entity":       {[]*mcp.Tool{ok}, draft.Options{Entity: "Files"}},
		"entity empty": {[]*mcp.Tool{ok}, draft.Options{Entity: "a.b"}},
	} {
		if out, _, err := draft.Draft(c.tools, c.opts); err == nil || out != nil {
			t.Errorf("%s: drafted %s", name, out)
		}
	}
}

// TestGuessString: one line, with the tool, the pointer, the value as
// JSON and the reason.
func TestGuessString(t *testing.T) {
	g := draft.Guess{Tool: "t", Intent: "e.t", Pointer: "/p", Value: "high", Why: "because"}
	if got := g.String(); got != `t: /p = "high": because` {
		t.Errorf("String() = %q", got)
	}
	g = draft.Guess{Pointer: "/p", Why: "left out"}
	if got := g.String(); got != `/p: left out` {
		t.Errorf("String() = %q", got)
	}
	g = draft.Guess{Pointer: "/p", Value: false, Why: "w"}
	if got := g.String(); got != `/p = false: w` {
		t.Errorf("String() = %q", got)
	}
}

// TestListTools: every page, in order; an upstream that repeats a cursor
// is refused.
func TestListTools(t *testing.T) {
	ctx := context.Background()
	connect := func(t *testing.T, s *mcp.Server) *mcp.ClientSession {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}

	paged := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	var names []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		paged.AddTool(&mcp.Tool{Name: n, InputSchema: obj()}, handler)
		names = append(names, n)
	}
	tools, err := draft.ListTools(ctx, connect(t, paged))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range tools {
		got = append(got, tool.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("listed %v; want %v", got, names)
	}

	looping := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	looping.AddTool(&mcp.Tool{Name: "a", InputSchema: obj()}, handler)
	looping.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "a", InputSchema: obj()}}, NextCursor: "again"}, nil
		}
	})
	if _, err := draft.ListTools(ctx, connect(t, looping)); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Errorf("a looping upstream: %v", err)
	}
	if _, err := draft.ListTools(ctx, nil); err == nil {
		t.Error("no session: no error")
	}
}

// FuzzDraft: whatever the input schema, Draft does not panic, and a draft
// it returns loads and passes lint at level basic.
func FuzzDraft(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/properties/a"}}}}`,
		`{"type":"object","properties":{"a":{"anyOf":[true,false,{"type":"null"}]}}}`,
		`{"type":"object","properties":{"a":{"type":"number","minimum":"x","maxLength":-1}}}`,
		`{"type":"object","properties":{"a":{"type":"integer","exclusiveMinimum":1e308,"exclusiveMaximum":-1e308}}}`,
		`{"type":"object","properties":{"":{"enum":[]}},"required":[1,""]}`,
		`[]`, `null`, `true`, `"x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		if !json.Valid([]byte(schema)) {
			return
		}
		out, _, err := draft.Draft([]*mcp.Tool{{Name: "f", Description: "F", InputSchema: json.RawMessage(schema)}}, draft.Options{Entity: "z"})
		if err != nil {
			return
		}
		if _, err := manifest.Parse(out); err != nil {
			t.Fatalf("the draft of %s does not load: %v\n%s", schema, err, out)
		}
		if r := lint.Lint(out, lint.LintOptions{Level: lint.LevelBasic}); !r.Passed() {
			t.Fatalf("the draft of %s fails lint: %v", schema, r.Errors())
		}
	})
}

// TestDraftConfirmationMessage: a tool that needs confirmation is drafted a
// confirmation_message that names its key parameters as placeholders
// (required first, then what the call acts on, then other strings; at most
// three; in the upstream's required order), listed as a guess; the gateway
// renders it with the call's values. A tool that runs without confirmation,
// or whose parameters give nothing to show, gets none.
func TestDraftConfirmationMessage(t *testing.T) {
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		name, tool string
		schema     json.RawMessage
		ann        *mcp.ToolAnnotations
		want       string
	}{
		{"path before content", "write_file", schema(`{"type":"object","required":["content","path"],"properties":{"content":{"type":"string"},"path":{"type":"string"}}}`), nil,
			"Write file with path {{path}} and content {{content}}?"},
		{"the upstream's order among equals", "move_file", schema(`{"type":"object","required":["source","destination"],"properties":{"destination":{"type":"string"},"source":{"type":"string"}}}`), nil,
			"Move file with source {{source}} and destination {{destination}}?"},
		{"at most three, optional flags left out", "sendEmail", schema(`{"type":"object","required":["to","subject","body","cc"],"properties":{
			"to":{"type":"string","format":"email"},"subject":{"type":"string"},"body":{"type":"string"},"cc":{"type":"array","items":{"type":"string"}},
			"dryRun":{"type":"boolean"},"priority":{"type":"integer"}}}`), nil,
			"Send email with to {{to}}, subject {{subject}} and body {{body}}?"},
		{"an id by its word, optional string last", "delete_record", schema(`{"type":"object","required":["force","recordId"],"properties":{"force":{"type":"boolean"},"recordId":{"type":"string"},"reason":{"type":"string"}}}`), nil,
			"Delete record with record id {{recordId}}, force {{force}} and reason {{reason}}?"},
		{"a name the placeholder syntax cannot carry is skipped", "run", schema(`{"type":"object","required":["a b","cmd"],"properties":{"a b":{"type":"string"},"cmd":{"type":"string"}}}`), nil,
			"Run with cmd {{cmd}}?"},
		{"no parameters", "restart", schema(`{"type":"object","properties":{}}`), nil, ""},
		{"only optional numbers", "compact", schema(`{"type":"object","properties":{"level":{"type":"integer"}}}`), nil, ""},
		{"no confirmation", "read_file", schema(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`), &mcp.ToolAnnotations{ReadOnlyHint: true}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, gs, _ := mustDraft(t, []*mcp.Tool{{Name: c.tool, Description: "Does it", InputSchema: c.schema, Annotations: c.ann}}, draft.Options{Entity: "thing"})
			a := m.Tool(c.tool)
			if a.ConfirmationMessage != c.want {
				t.Errorf("confirmation_message %q, want %q", a.ConfirmationMessage, c.want)
			}
			g := guessed(gs, "/confirmation_message")
			if c.want == "" {
				if len(g) != 0 {
					t.Errorf("listed %v", g)
				}
				return
			}
			if len(g) != 1 || g[0].Value != c.want || !strings.Contains(g[0].Why, "reword it") {
				t.Errorf("confirmation_message guesses %v", g)
			}
		})
	}
	// The gateway fills the placeholders with the call's values.
	m, _, _ := mustDraft(t, []*mcp.Tool{{Name: "write_file", Description: "Writes", InputSchema: cases[0].schema}}, draft.Options{Entity: "fs"})
	got := gate.RenderConfirmationMessage(m.Tool("write_file"), map[string]any{"path": "/srv/notes.txt", "content": "bye"})
	if want := "Write file with path /srv/notes.txt and content bye?"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}
