package lint

import (
	"path/filepath"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
)

// TestConformance lints the AXAG reference corpus's example manifests
// (../shared/spec/axag) when the corpus is beside the repository, as in CI;
// on a fresh clone it is skipped with one line. The project's own manifests
// (testdata/axag) get the same checks in TestLintExamples.
func TestConformance(t *testing.T) {
	dir := fixtures.Corpus(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	checkLint(t, path, map[string]lintExpectation{
		"valid-basic.json":             {true, []string{"AXAG-LINT-007 /actions/1/idempotent"}},
		"invalid-bad-action-type.json": {false, []string{"AXAG-LINT-004 /actions/0/action_type"}},
		"invalid-bad-risk-level.json":  {false, []string{"AXAG-LINT-007 /actions/0/idempotent", "AXAG-LINT-005 /actions/0/risk_level"}},
		"invalid-missing-intent.json":  {false, []string{"AXGATE-SCHEMA /actions/0/intent"}},
	})
}
