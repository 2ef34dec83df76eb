package manifest

import (
	"github.com/axgate/axgate/internal/fixtures"

	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lintJSON lints a manifest written as a Go value.
func lintJSON(t *testing.T, doc any, opts LintOptions) *LintResult {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return Lint(data, opts)
}

func v1(actions ...map[string]any) map[string]any {
	acts := make([]any, len(actions))
	for i, a := range actions {
		acts[i] = a
	}
	return map[string]any{"version": "1.0.0", "conformance": "basic", "actions": acts}
}

func act(intent, typ string, kv ...any) map[string]any {
	a := map[string]any{
		"intent": intent, "entity": strings.Split(intent, ".")[0], "action_type": typ,
		"description": "Does " + intent + " for the caller",
	}
	if typ == "write" || typ == "delete" {
		a["idempotent"] = false
	}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i].(string)] = kv[i+1]
	}
	return a
}

func rules(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Rule + " " + f.Path
	}
	return out
}

// lintExpectation is what linting one example manifest finds.
type lintExpectation struct {
	pass  bool
	rules []string
}

// TestLintExamples lints the project's test manifests.
func TestLintExamples(t *testing.T) {
	checkLint(t, fixtures.Manifest, map[string]lintExpectation{
		"shop-basic.json": {true, []string{"AXAG-LINT-007 /actions/1/idempotent"}},
		"shop-full.json": {true, []string{"AXGATE-PRECOND-001 /actions/2/preconditions/0", "AXGATE-PRECOND-001 /actions/2/preconditions/1",
			"AXGATE-PRECOND-001 /actions/2/preconditions/2", "AXGATE-PRECOND-001 /actions/3/preconditions/0", "AXGATE-PRECOND-001 /actions/3/preconditions/1"}},
		"invalid-action-type.json":    {false, []string{"AXAG-LINT-004 /actions/0/action_type"}},
		"invalid-risk-level.json":     {false, []string{"AXAG-LINT-007 /actions/0/idempotent", "AXAG-LINT-005 /actions/0/risk_level"}},
		"invalid-missing-intent.json": {false, []string{"AXGATE-SCHEMA /actions/0/intent"}},
	})
}

func checkLint(t *testing.T, path func(string) string, cases map[string]lintExpectation) {
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := LintFile(path(name), LintOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed() != c.pass || !slices.Equal(rules(r.Findings), c.rules) {
				t.Errorf("passed %v, findings %v; want %v, %v", r.Passed(), rules(r.Findings), c.pass, c.rules)
			}
			if c.pass != (r.Manifest != nil) {
				t.Errorf("Manifest is %v for a manifest that passes=%v", r.Manifest, c.pass)
			}
		})
	}
}

func TestLintSafetyRules(t *testing.T) {
	cases := []struct {
		name   string
		action map[string]any
		want   []string
	}{
		{"high risk without confirmation", act("order.place", "write", "risk_level", "high", "scope", "user"),
			[]string{"AXAG-LINT-006 /actions/0/confirmation_required"}},
		{"critical risk with confirmation", act("order.place", "write", "risk_level", "critical", "confirmation_required", true, "scope", "user"), nil},
		{"write without idempotent", map[string]any{"intent": "cart.add", "entity": "cart", "action_type": "write", "description": "Adds an item to the cart"},
			[]string{"AXAG-LINT-007 /actions/0/idempotent"}},
		{"read without idempotent", map[string]any{"intent": "cart.view", "entity": "cart", "action_type": "read", "description": "Shows the cart contents"}, nil},
		{"roles without scope", act("user.invite", "write", "required_roles", []any{"admin"}),
			[]string{"AXAG-LINT-011 /actions/0/scope"}},
		{"roles with scope", act("user.invite", "write", "required_roles", []any{"admin"}, "scope", "tenant"), nil},
		{"tenant boundary without scope", act("report.read", "read", "tenant_boundary", "relaxed"),
			[]string{"AXAG-LINT-011 /actions/0/scope"}},
		{"approval without roles", act("budget.approve", "write", "approval_required", true, "scope", "tenant"),
			[]string{"AXAG-LINT-012 /actions/0/approval_roles"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := lintJSON(t, v1(c.action), LintOptions{})
			if got := rules(r.Findings); !slices.Equal(got, c.want) {
				t.Errorf("findings %v, want %v", got, c.want)
			}
			for _, f := range r.Findings {
				if f.Fix == "" || f.Message == "" {
					t.Errorf("finding without message or fix: %+v", f)
				}
			}
		})
	}
}

func TestLintPreconditionGraph(t *testing.T) {
	t.Run("three-action cycle is reported as its path", func(t *testing.T) {
		r := lintJSON(t, v1(
			act("a.run", "write", "preconditions", []any{"b done"}, "postconditions", []any{"a done"}),
			act("b.run", "write", "preconditions", []any{"c done"}, "postconditions", []any{"b done"}),
			act("c.run", "write", "preconditions", []any{"A  Done"}, "postconditions", []any{"c done"}),
		), LintOptions{})
		errs := r.Errors()
		if len(errs) != 1 || errs[0].Rule != RulePrecondCycle || errs[0].Path != "/actions/0/preconditions/0" {
			t.Fatalf("errors %v", errs)
		}
		if !strings.Contains(errs[0].Message, "a.run → b.run → c.run → a.run") {
			t.Errorf("cycle not reported as a path: %s", errs[0].Message)
		}
	})
	t.Run("self dependency", func(t *testing.T) {
		r := lintJSON(t, v1(act("s.renew", "write", "preconditions", []any{"active"}, "postconditions", []any{"active"})), LintOptions{})
		if e := r.Errors(); len(e) != 1 || !strings.Contains(e[0].Message, "s.renew → s.renew") {
			t.Errorf("errors %v", e)
		}
	})
	t.Run("self production is fine when another action produces it too", func(t *testing.T) {
		r := lintJSON(t, v1(
			act("s.renew", "write", "preconditions", []any{"active"}, "postconditions", []any{"active"}),
			act("s.login", "write", "postconditions", []any{"active"}),
		), LintOptions{})
		if len(r.Findings) != 0 {
			t.Errorf("findings %v", r.Findings)
		}
	})
	t.Run("a chain is not a cycle", func(t *testing.T) {
		r := lintJSON(t, v1(
			act("cart.add", "write", "postconditions", []any{"cart is not empty"}),
			act("order.place", "write", "preconditions", []any{"cart is not empty", "payment method is set"}, "postconditions", []any{"order created"}),
			act("order.ship", "write", "preconditions", []any{"order created"}),
		), LintOptions{})
		if got := rules(r.Findings); !slices.Equal(got, []string{"AXGATE-PRECOND-001 /actions/1/preconditions/1"}) {
			t.Errorf("findings %v", got)
		}
		if !strings.Contains(r.Findings[0].Message, "the host must check it") {
			t.Errorf("message %q", r.Findings[0].Message)
		}
	})
	t.Run("two cycles", func(t *testing.T) {
		r := lintJSON(t, v1(
			act("a.run", "write", "preconditions", []any{"b"}, "postconditions", []any{"a"}),
			act("b.run", "write", "preconditions", []any{"a"}, "postconditions", []any{"b"}),
			act("c.run", "write", "preconditions", []any{"d"}, "postconditions", []any{"c"}),
			act("d.run", "write", "preconditions", []any{"c"}, "postconditions", []any{"d"}),
		), LintOptions{})
		if got := rules(r.Errors()); !slices.Equal(got, []string{"AXGATE-PRECOND-002 /actions/0/preconditions/0", "AXGATE-PRECOND-002 /actions/2/preconditions/0"}) {
			t.Errorf("errors %v", got)
		}
	})
	t.Run("a long chain does not exhaust anything", func(t *testing.T) {
		var acts []map[string]any
		for i := range 2000 {
			acts = append(acts, act(fmt.Sprintf("step.s%d", i), "write",
				"preconditions", []any{fmt.Sprintf("s%d done", i+1)}, "postconditions", []any{fmt.Sprintf("s%d done", i)}))
		}
		r := lintJSON(t, v1(acts...), LintOptions{})
		if len(r.Errors()) != 0 || len(r.Warnings()) != 1 {
			t.Errorf("errors %d warnings %d", len(r.Errors()), len(r.Warnings()))
		}
	})
}

func TestLintLevels(t *testing.T) {
	bare := map[string]any{"intent": "product.search", "entity": "product", "action_type": "read", "description": "Searches the catalogue by keyword"}
	doc := map[string]any{"version": "1.0.0", "actions": []any{bare}}
	cases := []struct {
		level Level
		want  []string
	}{
		{LevelBasic, []string{"AXGATE-LEVEL-002 /conformance"}},
		{LevelIntermediate, []string{
			"AXGATE-LEVEL-001 /actions/0/required_parameters", "AXGATE-LEVEL-001 /actions/0/risk_level", "AXGATE-LEVEL-001 /actions/0/scope",
			"AXGATE-LEVEL-001 /conformance", "AXGATE-LEVEL-001 /generated_at"}},
		{LevelFull, []string{
			"AXGATE-LEVEL-001 /actions/0/idempotent", "AXGATE-LEVEL-001 /actions/0/required_parameters", "AXGATE-LEVEL-001 /actions/0/risk_level",
			"AXGATE-LEVEL-001 /actions/0/scope", "AXGATE-LEVEL-001 /conformance", "AXGATE-LEVEL-001 /generated_at", "AXGATE-LEVEL-001 /source"}},
	}
	for _, c := range cases {
		r := lintJSON(t, doc, LintOptions{Level: c.level})
		if got := rules(r.Findings); !slices.Equal(got, c.want) || r.Level != c.level {
			t.Errorf("%s: findings %v, want %v", c.level, got, c.want)
		}
	}
	// Without --level the declared level applies.
	full := map[string]any{"version": "1.0.0", "conformance": "full", "actions": []any{bare}}
	if r := lintJSON(t, full, LintOptions{}); r.Level != LevelFull || r.DeclaredLevel != LevelFull || r.Passed() {
		t.Errorf("declared level not applied: %s, passed %v", r.Level, r.Passed())
	}
}

func TestLintNeverPanics(t *testing.T) {
	inputs := []string{
		``, `null`, `[]`, `"x"`, `{"actions": 3}`, `{"actions": [3, null, []]}`, `{"entities": [{"actions": [{"parameters": {"a": 3}}]}]}`,
		`{"version": "1.0.0", "actions": [{"intent": "a.b", "entity": "a", "action_type": "read", "description": "x", "preconditions": [3], "postconditions": "y"}]}`,
		"version: 1.0.0\nactions: [{intent: a.b}]\n", "- a\n- b\n", "{\"a\": 1, \"a\": 2}", "\xff\xfe",
	}
	for _, in := range inputs {
		r := Lint([]byte(in), LintOptions{})
		if r.Passed() {
			t.Errorf("%q passes", in)
		}
		// Prune either refuses or returns a manifest that loads.
		if out, _, err := r.Prune(); err == nil {
			if _, err := Parse(out); err != nil {
				t.Errorf("%q: prune produced a manifest that does not load: %v", in, err)
			}
		}
	}
}

func TestPruneReferenceFormKeepsEntities(t *testing.T) {
	doc := map[string]any{
		"version": "1.0.0",
		"entities": []any{map[string]any{"name": "ticket", "actions": []any{
			map[string]any{"intent": "ticket.create", "action_type": "write", "description": "Opens a support ticket", "idempotent": false},
			map[string]any{"intent": "ticket.close", "action_type": "closing", "description": "Closes a support ticket"},
		}}},
	}
	r := lintJSON(t, doc, LintOptions{})
	out, removed, err := r.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Intent != "ticket.close" || removed[0].Pointer != "/entities/0/actions/1" {
		t.Errorf("removed %+v", removed)
	}
	m, err := Parse(out)
	if err != nil {
		t.Fatalf("pruned manifest does not load: %v\n%s", err, out)
	}
	if len(m.Actions) != 1 || m.Actions[0].Intent != "ticket.create" || m.Form != FormReference {
		t.Errorf("pruned manifest %+v", m.Actions)
	}
	// The original document is left as it was.
	if again := lintJSON(t, doc, LintOptions{}); again.Passed() {
		t.Error("Prune changed the linted document")
	}
}

func TestLintIsDeterministic(t *testing.T) {
	path := fixtures.Manifest("shop-full.json")
	first, err := LintFile(path, LintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(first.Findings)
	for range 20 {
		r, _ := LintFile(path, LintOptions{})
		if got, _ := json.Marshal(r.Findings); string(got) != string(want) || r.Quality.Score != first.Quality.Score {
			t.Fatalf("findings differ between runs:\n%s\n%s", got, want)
		}
	}
}
