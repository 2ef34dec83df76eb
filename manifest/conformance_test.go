package manifest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
)

// TestConformance loads and lints the AXAG reference corpus's example
// manifests (../shared/spec/axag) when the corpus is beside the
// repository, as in CI; on a fresh clone it is skipped with one line. The
// project's own manifests (testdata/axag) get the same checks in
// TestExampleManifests and TestLintExamples.
func TestConformance(t *testing.T) {
	dir := fixtures.Corpus(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	t.Run("load", func(t *testing.T) {
		for name, n := range map[string]int{"valid-basic.json": 2, "valid-full.json": 5} {
			m, err := LoadFile(path(name))
			if err != nil || len(m.Actions) != n || m.Form != FormV1 {
				t.Errorf("%s: %v; want %d actions, form v1", name, err, n)
			}
		}
		for name, want := range map[string]Problem{
			"invalid-bad-action-type.json": {Path: "/actions/0/action_type", Keyword: "enum"},
			"invalid-bad-risk-level.json":  {Path: "/actions/0/risk_level", Keyword: "enum"},
			"invalid-missing-intent.json":  {Path: "/actions/0/intent", Keyword: "required"},
		} {
			m, err := LoadFile(path(name))
			var me *Error
			if m != nil || !errors.As(err, &me) || len(me.Problems) != 1 || me.Problems[0].Path != want.Path || me.Problems[0].Keyword != want.Keyword {
				t.Errorf("%s: model %v, error %v; want exactly one problem at %s (%s)", name, m != nil, err, want.Path, want.Keyword)
			}
		}
	})
	t.Run("lint", func(t *testing.T) {
		checkLint(t, path, map[string]lintExpectation{
			"valid-basic.json":             {true, []string{"AXAG-LINT-007 /actions/1/idempotent"}},
			"invalid-bad-action-type.json": {false, []string{"AXAG-LINT-004 /actions/0/action_type"}},
			"invalid-bad-risk-level.json":  {false, []string{"AXAG-LINT-007 /actions/0/idempotent", "AXAG-LINT-005 /actions/0/risk_level"}},
			"invalid-missing-intent.json":  {false, []string{"AXGATE-SCHEMA /actions/0/intent"}},
		})
	})
}
