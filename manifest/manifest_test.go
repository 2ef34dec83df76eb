package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
)

// shopFull and shopBasic are the project's own test manifests
// (testdata/axag at the repository's root).
var (
	shopFull  = fixtures.Manifest("shop-full.json")
	shopBasic = fixtures.Manifest("shop-basic.json")
)

func loadErr(t *testing.T, err error) *manifest.Error {
	t.Helper()
	var me *manifest.Error
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T); want *manifest.Error", err, err)
	}
	return me
}

// TestExampleManifests: the project's valid test manifests load, and each
// invalid one is refused with exactly one problem at the right place.
func TestExampleManifests(t *testing.T) {
	checkExamples(t, fixtures.Manifest,
		map[string]int{"shop-basic.json": 2, "shop-full.json": 5},
		map[string]manifest.Problem{
			"invalid-action-type.json":    {Path: "/actions/0/action_type", Keyword: "enum"},
			"invalid-risk-level.json":     {Path: "/actions/0/risk_level", Keyword: "enum"},
			"invalid-missing-intent.json": {Path: "/actions/0/intent", Keyword: "required"},
		})
}

func checkExamples(t *testing.T, path func(string) string, valid map[string]int, invalid map[string]manifest.Problem) {
	for name, n := range valid {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.LoadFile(path(name))
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Actions) != n || m.Form != manifest.FormV1 {
				t.Fatalf("got %d actions, form %s; want %d, v1", len(m.Actions), m.Form, n)
			}
		})
	}
	for name, want := range invalid {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.LoadFile(path(name))
			if m != nil {
				t.Fatal("an invalid manifest produced a model")
			}
			me := loadErr(t, err)
			if len(me.Problems) != 1 || me.Problems[0].Path != want.Path || me.Problems[0].Keyword != want.Keyword {
				t.Fatalf("problems = %+v; want exactly one at %s (%s)", me.Problems, want.Path, want.Keyword)
			}
			if !strings.Contains(err.Error(), want.Path) {
				t.Fatalf("error text %q does not name the path", err)
			}
		})
	}
}

// normalized strips what legitimately differs between the two forms: where
// things stand in the source, the form itself, and the order of parameters
// (a map has none).
func normalized(m *manifest.Manifest) *manifest.Manifest {
	c := *m
	c.Form, c.Metadata = "", nil
	acts := make([]*manifest.Action, len(m.Actions))
	for i, a := range m.Actions {
		ac := *a
		ac.Pointer = ""
		ps := make([]*manifest.Parameter, len(a.Parameters))
		for j, p := range a.Parameters {
			pc := *p
			pc.Pointer = ""
			ps[j] = &pc
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
		ac.Parameters = ps
		acts[i] = &ac
	}
	c.Actions = acts
	return &c
}

func TestReferenceFormTwin(t *testing.T) {
	v1, err := manifest.LoadFile(shopFull)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := manifest.LoadFile(filepath.Join("testdata", "reference-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ref.Form != manifest.FormReference {
		t.Fatalf("form = %s", ref.Form)
	}
	a, b := normalized(v1), normalized(ref)
	for i := range a.Actions {
		x, y := a.Actions[i], b.Actions[i]
		// Compare the public model and the compiled input schemas.
		if !reflect.DeepEqual(x.Tool(), y.Tool()) {
			t.Errorf("action %s: tool definitions differ:\nv1:  %+v\nref: %+v", x.Intent, x.Tool(), y.Tool())
		}
		xp, yp := x.Parameters, y.Parameters
		if !reflect.DeepEqual(xp, yp) {
			t.Errorf("action %s: parameters differ", x.Intent)
		}
		if x.Entity != y.Entity || x.Type != y.Type || x.RiskLevel != y.RiskLevel || !reflect.DeepEqual(x.Preconditions, y.Preconditions) {
			t.Errorf("action %s: fields differ", x.Intent)
		}
	}
	if a.Version != b.Version || a.Conformance != b.Conformance || !reflect.DeepEqual(a.Source, b.Source) {
		t.Errorf("top level differs: %+v vs %+v", a, b)
	}
}

func TestSafetyFields(t *testing.T) {
	m, err := manifest.LoadFile(filepath.Join("testdata", "safety.json"))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Action("booking.create")
	if a == nil || a.ToolName() != "booking_create" {
		t.Fatalf("action = %+v", a)
	}
	if a.RateLimit == nil || a.RateLimit.Count != 10 || a.RateLimit.Per != time.Minute {
		t.Errorf("rate limit = %+v", a.RateLimit)
	}
	if a.Cooldown != 2*time.Second || a.ApprovalCount != 2 || !a.StrictTenant() {
		t.Errorf("cooldown %v, approval count %d, strict %v", a.Cooldown, a.ApprovalCount, a.StrictTenant())
	}
	if len(a.Constraints) != 1 || a.Constraints[0].Expr != "args.check_out > args.check_in" || a.Constraints[0].Pointer != "/actions/0/constraints/stay_is_forward" {
		t.Errorf("constraints = %+v", a.Constraints)
	}
	if a.CompiledOutputSchema() == nil {
		t.Error("output_schema not compiled")
	}
	if got := a.Param("website").Format; got != "uri" {
		t.Errorf("url format normalized to %q, want uri", got)
	}
	if got := a.Param("arrival").Format; got != "date-time" {
		t.Errorf("datetime format normalized to %q, want date-time", got)
	}
}

func TestProblemsAreAggregatedWithPaths(t *testing.T) {
	doc := `{
	  "version": "1.0.0",
	  "actions": [
	    {"intent": "order.place", "entity": "order", "action_type": "write", "description": "x",
	     "confirmation_requried": true,
	     "required_parameters": [{"name": "id", "type": "string", "pattern": "(["}],
	     "optional_parameters": [{"name": "id", "type": "string"}, {"name": "n", "type": "string", "max": 3}],
	     "approval_required": true,
	     "rate_limit": "10/fortnight",
	     "cooldown": "soon",
	     "confirmation_message": "Place {{nope}}?"},
	    {"intent": "order.place", "entity": "order", "action_type": "read", "description": "dup", "operation_id": "order_place"},
	    {"intent": "notdotted", "entity": "order", "action_type": "read", "description": "bad intent"},
	    {"intent": "order.cancel", "entity": "order", "action_type": "write", "description": "x", "approval_count": 0}
	  ]
	}`
	_, err := manifest.Parse([]byte(doc))
	me := loadErr(t, err)
	want := map[string]string{
		"/actions/0/confirmation_requried":         `unknown field "confirmation_requried" (did you mean "confirmation_required"?)`,
		"/actions/0/required_parameters/0/pattern": "pattern does not compile",
		"/actions/0/optional_parameters/0/name":    `parameter "id" is both required and optional`,
		"/actions/0/optional_parameters/1":         "min/max apply to numbers",
		"/actions/0/approval_roles":                "approval_required is true but approval_roles is empty",
		"/actions/0/rate_limit":                    "is not N/second",
		"/actions/0/cooldown":                      "is not a positive duration",
		"/actions/0/confirmation_message":          "placeholder {{nope}} names no declared parameter",
		"/actions/1/intent":                        `intent "order.place" is already declared at /actions/0`,
		"/actions/2/intent":                        "does not match pattern",
		"/actions/3/approval_count":                "must be >= 1",
	}
	for path, msg := range want {
		found := false
		for _, p := range me.Problems {
			if p.Path == path && strings.Contains(p.Message, msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem at %s containing %q", path, msg)
		}
	}
	if t.Failed() {
		t.Logf("problems:\n%v", err)
	}
}

func TestLoadSources(t *testing.T) {
	data, err := os.ReadFile(shopFull)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"m/axag.json": {Data: data}}
	if _, err := manifest.LoadFS(fsys, "m/axag.json"); err != nil {
		t.Errorf("LoadFS: %v", err)
	}
	if _, err := manifest.Load(strings.NewReader(string(data))); err != nil {
		t.Errorf("Load: %v", err)
	}
	if _, err := manifest.Parse(data); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

func TestBadDocuments(t *testing.T) {
	cases := map[string]struct {
		doc, path, msg string
	}{
		"duplicate key":    {`{"version":"1.0.0","actions":[],"version":"2.0.0"}`, "/version", "duplicate key"},
		"not an object":    {`[1,2]`, "", "must be a JSON object"},
		"broken json":      {`{"version":`, "", "not a well-formed JSON document"},
		"yaml duplicate":   {"version: 1.0.0\nactions: []\nversion: 2.0.0\n", "", "already defined"},
		"yaml not mapping": {"- a\n- b\n", "", "must be a JSON object"},
		"empty":            {"", "", "empty YAML document"},
		"unknown top":      {`{"version":"1.0.0","actions":[],"extra":1}`, "/extra", `unknown field "extra"`},
		"deep":             {`{"version":"1.0.0","actions":[],"metadata":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "", "deeper than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.Parse([]byte(tc.doc))
			if m != nil {
				t.Fatal("bad document produced a model")
			}
			me := loadErr(t, err)
			if me.Problems[0].Path != tc.path || !strings.Contains(me.Problems[0].Message, tc.msg) {
				t.Fatalf("problems = %+v; want %q at %q", me.Problems, tc.msg, tc.path)
			}
		})
	}
}

func TestToolDefinitions(t *testing.T) {
	m, err := manifest.LoadFile(shopFull)
	if err != nil {
		t.Fatal(err)
	}
	tool := m.Tool("order_place").MCPTool()
	if !tool.Annotations.DestructiveHint || tool.Annotations.ReadOnlyHint || tool.Annotations.IdempotentHint {
		t.Errorf("order_place annotations = %+v", tool.Annotations)
	}
	search := m.Tool("product_search").MCPTool()
	if !search.Annotations.ReadOnlyHint || !search.Annotations.IdempotentHint || search.Annotations.DestructiveHint {
		t.Errorf("product_search annotations = %+v", search.Annotations)
	}
	in := tool.InputSchema
	if in["additionalProperties"] != false || !reflect.DeepEqual(in["required"], []any{"cart_id", "shipping_address_id"}) {
		t.Errorf("order_place inputSchema = %v", in)
	}
	props := in["properties"].(map[string]any)
	if props["cart_id"].(map[string]any)["format"] != "uuid" || props["notes"].(map[string]any)["maxLength"] != 500 {
		t.Errorf("properties = %v", props)
	}
	limit := m.Tool("product_search").InputSchema()["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["minimum"] != 1.0 || limit["maximum"] != 100.0 || limit["default"] != 20.0 {
		t.Errorf("limit schema = %v", limit)
	}
	basic, err := manifest.LoadFile(shopBasic)
	if err != nil {
		t.Fatal(err)
	}
	if s := basic.Actions[0].Tool().InputSchema; !reflect.DeepEqual(s, map[string]any{"type": "object"}) {
		t.Errorf("undeclared parameters: inputSchema = %v", s)
	}
	if basic.Actions[0].ParamSchema() != nil {
		t.Error("an action without declared parameters has a parameter schema")
	}
}
