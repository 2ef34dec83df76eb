package manifest

import (
	"github.com/axgate/axgate/internal/fixtures"

	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestGradeFor(t *testing.T) {
	cases := []struct {
		status Status
		score  float64
		want   string
	}{
		{StatusPass, 5.0, "A"}, {StatusPass, 4.0, "A"}, {StatusPass, 3.9, "B"}, {StatusPass, 3.0, "B"},
		{StatusPass, 2.9, "C"}, {StatusPass, 2.0, "C"}, {StatusPass, 1.9, "D"}, {StatusPass, 0, "D"},
		{StatusFail, 5.0, "F"}, {StatusFail, 0, "F"},
	}
	for _, c := range cases {
		if got := gradeFor(c.status, c.score); got != c.want {
			t.Errorf("gradeFor(%s, %.1f) = %s, want %s", c.status, c.score, got, c.want)
		}
	}
}

func TestQualityScore(t *testing.T) {
	described := func(name, typ string, kv ...any) map[string]any {
		p := map[string]any{"name": name, "type": typ, "description": "The " + name}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	perfect := act("order.place", "write", "risk_level", "high", "confirmation_required", true, "scope", "user",
		"side_effects", []any{"payment_charged"},
		"required_parameters", []any{described("cart_id", "string", "format", "uuid"), described("count", "number", "min", 1)})
	cases := []struct {
		name   string
		action map[string]any
		want   float64
	}{
		{"everything declared", perfect, 5.0},
		// Description 1, parameters 0, constraints 0, safety 1/4 (idempotent
		// only): 1.25 × 1.25 = 1.5625.
		{"bare write", map[string]any{"intent": "cart.add", "entity": "cart", "action_type": "write", "description": "Adds an item to the cart", "idempotent": true}, 1.6},
		// Short description 0.5; no parameters declared 0; safety 0/2.
		{"short description", map[string]any{"intent": "cart.view", "entity": "cart", "action_type": "read", "description": "Cart"}, 0.6},
		// Empty parameter list: 1 + 1 + 1 + 2/2 (risk, scope) = 5.0.
		{"declares no parameters", act("cart.view", "read", "risk_level", "none", "scope", "user", "required_parameters", []any{}), 5.0},
		// One of two strings constrained, one of two described: 1 + .5 + .5 + 1.
		{"half constrained", act("user.find", "read", "risk_level", "none", "scope", "tenant", "required_parameters",
			[]any{described("email", "string", "format", "email"), map[string]any{"name": "q", "type": "string"}}), 3.8},
	}
	for _, c := range cases {
		r := lintJSON(t, v1(c.action), LintOptions{})
		if r.Quality.Score != c.want {
			t.Errorf("%s: score %.2f, want %.1f (criteria %+v)", c.name, r.Quality.Score, c.want, r.Quality.Criteria)
		}
		if len(r.Quality.Criteria) != 4 {
			t.Errorf("%s: criteria %+v", c.name, r.Quality.Criteria)
		}
	}
	if r := lintJSON(t, v1(), LintOptions{}); r.Quality.Score != 0 {
		t.Errorf("a manifest without actions scores %.1f", r.Quality.Score)
	}
}

func TestGradeReport(t *testing.T) {
	path := fixtures.Manifest("shop-full.json")
	r, err := LintFile(path, LintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 11, 11, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	rep := r.Report("", now)
	if rep.ManifestID != "shop.example/shop-full" || rep.Timestamp != "2026-05-11T09:00:00Z" || rep.ValidatorVersion != ValidatorVersion {
		t.Errorf("report header %+v", rep)
	}
	if rep.Deterministic.Status != StatusPass || rep.Grade != "A" || len(rep.Actions) != 5 || len(rep.FailingActions) != 0 {
		t.Errorf("report %+v", rep)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"manifestId", "validatorVersion", "timestamp", "deterministic", "quality", "actions", "grade"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("report has no %q: %s", k, data)
		}
	}
	det := generic["deterministic"].(map[string]any)
	if det["errors"] == nil || det["warnings"] == nil {
		t.Errorf("errors and warnings must be arrays, never null: %s", data)
	}
	if got := r.Report("shop/checkout", now).ManifestID; got != "shop/checkout" {
		t.Errorf("explicit id ignored: %s", got)
	}
}

func TestManifestID(t *testing.T) {
	cases := []struct{ source, url, tool, want string }{
		{"dir/valid-full.json", "https://example.com/app", "axag-cli", "example.com/valid-full"},
		{"valid-basic.json", "", "axag-cli", "axag-cli/valid-basic"},
		{"m.yaml", "", "", "local/m"},
		{"", "", "", "local/manifest"},
		{"x.json", "", "my/tool", "my-tool/x"},
	}
	for _, c := range cases {
		if got := ManifestID(c.source, c.url, c.tool); got != c.want {
			t.Errorf("ManifestID(%q, %q, %q) = %q, want %q", c.source, c.url, c.tool, got, c.want)
		}
	}
}

func ExampleLint() {
	r := Lint([]byte(`{
	  "version": "1.0.0",
	  "conformance": "basic",
	  "actions": [{
	    "intent": "account.delete", "entity": "account", "action_type": "delete",
	    "description": "Delete the caller's account", "risk_level": "critical", "idempotent": true
	  }]
	}`), LintOptions{Source: "account.json"})
	for _, f := range r.Findings {
		fmt.Println(f.Severity, f.Rule, f.Path)
		fmt.Println("  fix:", f.Fix)
	}
	rep := r.Report("", time.Unix(0, 0))
	fmt.Println(rep.Deterministic.Status, rep.Quality.Score, rep.Grade)
	// Output:
	// warning AXAG-LINT-006 /actions/0/confirmation_required
	//   fix: set confirmation_required to true so that a person confirms each call (and write a confirmation_message)
	// PASS 1.8 D
}
