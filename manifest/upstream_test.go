package manifest_test

import (
	"strings"
	"testing"

	"github.com/axgate/axgate/internal/lint"

	"github.com/axgate/axgate/manifest"
)

const pin = "5b1f4ae2a1c3d9e0f7b6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4"

// TestUpstreamSHA256Loads: the pin is read in every form a manifest is
// written in (v1 JSON, reference JSON, YAML), and an action without one has
// none.
func TestUpstreamSHA256Loads(t *testing.T) {
	docs := map[string]string{
		"v1": `{"version": "1.0.0", "actions": [
		  {"intent": "file.read", "entity": "file", "action_type": "read", "description": "Reads a file",
		   "operation_id": "read_file", "upstream_sha256": "` + pin + `"},
		  {"intent": "file.list", "entity": "file", "action_type": "read", "description": "Lists files"}]}`,
		"reference": `{"version": "1.0.0", "entities": [{"name": "file", "actions": [
		  {"intent": "file.read", "action_type": "read", "description": "Reads a file",
		   "operation_id": "read_file", "upstream_sha256": "` + pin + `"},
		  {"intent": "file.list", "action_type": "read", "description": "Lists files"}]}]}`,
		"yaml": "version: 1.0.0\nentities:\n  - name: file\n    actions:\n" +
			"      - intent: file.read\n        action_type: read\n        description: Reads a file\n" +
			"        operation_id: read_file\n        upstream_sha256: " + pin + "\n" +
			"      - intent: file.list\n        action_type: read\n        description: Lists files\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Tool("read_file").UpstreamSHA256; got != pin {
				t.Errorf("UpstreamSHA256 = %q; want %q", got, pin)
			}
			if got := m.Action("file.list").UpstreamSHA256; got != "" {
				t.Errorf("an action without a pin has UpstreamSHA256 %q", got)
			}
		})
	}
}

// TestUpstreamSHA256Refused: a pin that is not 64 lowercase hex digits is a
// load error at its path that says what a pin looks like, in both forms;
// lint says how to fix it.
func TestUpstreamSHA256Refused(t *testing.T) {
	bad := map[string]string{
		"uppercase":  `"` + strings.ToUpper(pin) + `"`,
		"short":      `"` + pin[:63] + `"`,
		"long":       `"` + pin + `0"`,
		"prefixed":   `"sha256:` + pin[7:] + `"`,
		"empty":      `""`,
		"not string": `42`,
	}
	for name, v := range bad {
		for form, doc := range map[string]string{
			"v1": `{"version": "1.0.0", "actions": [{"intent": "file.read", "entity": "file", "action_type": "read",
			  "description": "Reads a file", "upstream_sha256": ` + v + `}]}`,
			"reference": `{"version": "1.0.0", "entities": [{"name": "file", "actions": [{"intent": "file.read",
			  "action_type": "read", "description": "Reads a file", "upstream_sha256": ` + v + `}]}]}`,
		} {
			t.Run(name+"/"+form, func(t *testing.T) {
				m, err := manifest.Parse([]byte(doc))
				if m != nil {
					t.Fatal("a bad pin produced a model")
				}
				me := loadErr(t, err)
				path := "/actions/0/upstream_sha256"
				if form == "reference" {
					path = "/entities/0/actions/0/upstream_sha256"
				}
				if len(me.Problems) != 1 || me.Problems[0].Path != path {
					t.Fatalf("problems = %+v; want one at %s", me.Problems, path)
				}
				if name != "not string" && !strings.Contains(me.Problems[0].Message, "64 lowercase hexadecimal digits") {
					t.Errorf("message %q does not say what a pin looks like", me.Problems[0].Message)
				}
				r := lint.Lint([]byte(doc), lint.LintOptions{})
				if r.Passed() || len(r.Errors()) != 1 || r.Errors()[0].Path != path {
					t.Fatalf("lint errors = %+v; want one at %s", r.Errors(), path)
				}
				if name != "not string" && !strings.Contains(r.Errors()[0].Fix, "64 lowercase hex") {
					t.Errorf("lint fix %q does not say how to write a pin", r.Errors()[0].Fix)
				}
			})
		}
	}
}

// TestUpstreamSHA256SurvivesPrune: the manifest Prune writes back keeps the
// pins of the actions it keeps.
func TestUpstreamSHA256SurvivesPrune(t *testing.T) {
	doc := `{"version": "1.0.0", "entities": [{"name": "file", "actions": [
	  {"intent": "file.read", "action_type": "read", "description": "Reads a file", "upstream_sha256": "` + pin + `"},
	  {"intent": "file.zap", "action_type": "zap", "description": "Not an action type"}]}]}`
	out, removed, err := lint.Lint([]byte(doc), lint.LintOptions{}).Prune()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 {
		t.Fatalf("removed %+v", removed)
	}
	m, err := manifest.Parse(out)
	if err != nil {
		t.Fatalf("pruned manifest does not load: %v\n%s", err, out)
	}
	if got := m.Action("file.read").UpstreamSHA256; got != pin {
		t.Errorf("pin after Prune = %q; want %q\n%s", got, pin, out)
	}
}
