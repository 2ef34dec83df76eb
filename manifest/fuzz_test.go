package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
)

// FuzzParse feeds arbitrary documents to the loader. It must never panic,
// and must either return a model or a *manifest.Error with at least one
// problem — never both, never neither.
func FuzzParse(f *testing.F) {
	for _, p := range []string{
		shopFull,
		shopBasic,
		fixtures.Manifest("invalid-risk-level.json"),
		filepath.Join("testdata", "reference-full.yaml"),
		filepath.Join("testdata", "safety.json"),
	} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Parse(data)
		if (m == nil) == (err == nil) {
			t.Fatalf("Parse returned model %v and error %v", m != nil, err)
		}
		if err != nil {
			var me *manifest.Error
			if errors.As(err, &me) && len(me.Problems) == 0 {
				t.Fatal("a *manifest.Error without problems")
			}
			return
		}
		for _, a := range m.Actions {
			_ = a.MCPTool()
			if a.ParametersDeclared && a.ParamSchema() == nil {
				t.Fatalf("%s: declared parameters but no compiled schema", a.Intent)
			}
		}
	})
}
