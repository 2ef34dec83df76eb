package manifest_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFieldsInManifestDoc: the field tables of docs/manifest.md name every
// property the manifest schema declares (document, entity, action,
// parameter, source) and nothing else, so that a field added to the schema
// is documented and a documented field exists.
func TestFieldsInManifestDoc(t *testing.T) {
	data, err := os.ReadFile("../docs/manifest.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "<!-- manifest-fields:start -->")
	if !ok {
		t.Fatal("docs/manifest.md has no <!-- manifest-fields:start --> section")
	}
	section, _, _ = strings.Cut(section, "<!-- manifest-fields:end -->")
	documented := map[string]bool{}
	cell := regexp.MustCompile("`([a-zA-Z_0-9]+)`")
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")[0]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}

	raw, err := os.ReadFile("schema/manifest.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range schema.Definitions {
		for name, p := range d.Properties {
			declared[name] = true
			if name == "source" { // its url, paths, tool, tool_version are named in its row
				for sub := range p.Properties {
					declared[sub] = true
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		if !documented[name] {
			t.Errorf("the schema declares %q; docs/manifest.md's field tables do not name it", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if !declared[name] {
			t.Errorf("docs/manifest.md's field tables name %q, which the schema does not declare", name)
		}
	}
}
