package lint

import (
	"slices"
	"strings"
	"testing"
)

func TestUnguardedOptionalReads(t *testing.T) {
	optional := map[string]bool{"x": true, "y": true}
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{"args.amount <= 1000.0 || args.x == 'CFO-OK'", []string{"x"}},
		{"args.x > 1", []string{"x"}},
		{"x > 1", []string{"x"}},
		{"args['y'] > 1 && args.x > 2", []string{"y", "x"}},
		{"has(args.x) && args.x > 5", nil},
		{"!has(args.x) || args.x > 5", nil},
		{"'x' in args && args.x > 5", nil},
		{"has(args.x) ? args.x > 5 : true", nil},
		{"!has(args.x) ? true : args.x > 5", nil},
		{"has(args.x) ? true : args.x > 5", []string{"x"}},
		{"!has(args.x) || !has(args.y) || args.x > args.y", nil},
		{"has(args.x) && has(args.y) && args.x > args.y", nil},
		{"(has(args.x) || has(args.y)) && args.x > 1", []string{"x"}},
		// The guard must come first: CEL evaluates left to right and the
		// enforcer refuses on the error of the read.
		{"args.x > 5 && has(args.x)", []string{"x"}},
		{"has(args.x)", nil},
		{"size(args.x) > 0", []string{"x"}},
		{"args.amount > 0", nil},
		// A comprehension variable shadows a parameter.
		{"args.items.all(x, x > 0)", nil},
		{"args.items.all(i, i < args.y)", []string{"y"}},
		{"has(args.y) && args.items.all(i, i < args.y)", nil},
		{"not ( parsed", nil},
	} {
		if got := unguardedOptionalReads(tc.expr, optional); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// TestLintConstraintOptional: lint warns, with a fix, about a constraint
// that reads an optional argument outside has(), and only about it.
func TestLintConstraintOptional(t *testing.T) {
	r := lintJSON(t, v1(map[string]any{
		"intent": "payment.send", "entity": "payment", "action_type": "write", "description": "Send a payment",
		"risk_level": "low", "idempotent": false, "scope": "global",
		"required_parameters": []any{map[string]any{"name": "amount", "type": "number", "description": "Amount"}},
		"optional_parameters": []any{map[string]any{"name": "cfo_code", "type": "string", "description": "Code"}},
		"constraints": map[string]any{
			"cfo":     "args.amount <= 1000.0 || args.cfo_code == 'CFO-OK'",
			"guarded": "args.amount <= 1000.0 || (has(args.cfo_code) && args.cfo_code == 'CFO-OK')",
		},
	}), LintOptions{})
	var got []Finding
	for _, f := range r.Findings {
		if f.Rule == ruleConstraintOptional {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Path != "/actions/0/constraints/cfo" || got[0].Severity != SeverityWarning ||
		!strings.Contains(got[0].Message, "cfo_code") || !strings.Contains(got[0].Fix, "has(args.cfo_code) &&") {
		t.Fatalf("findings = %+v", got)
	}
	if !r.Passed() {
		t.Fatalf("a warning failed the manifest: %+v", r.Errors())
	}
}
