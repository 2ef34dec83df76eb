package manifest_test

import (
	"strings"
	"testing"

	"github.com/axgate/axgate/manifest"
)

const sharedDoc = `{"version": "1.0.0", "actions": [
  {"intent": "file.read", "entity": "file", "action_type": "read", "description": "Reads a file", "operation_id": "read_file", "upstream": "files"},
  {"intent": "note.add", "entity": "note", "action_type": "write", "description": "Adds a note", "operation_id": "add_note", "upstream": "notes"},
  {"intent": "file.list", "entity": "file", "action_type": "read", "description": "Lists files", "operation_id": "list_files", "upstream": "files"}],
 "resources": [{"intent": "file.doc", "entity": "file", "description": "Docs", "uri_prefix": "file:///docs/", "upstream": "files"}],
 "prompts": [{"intent": "note.prompt", "entity": "note", "name": "summarize", "description": "Summarize", "upstream": "notes"}]}`

// TestForUpstreamTakesTheEntriesThatNameIt: a manifest shared by several
// upstreams gives each the actions, resources and prompts that name it,
// and nothing of the others.
func TestForUpstreamTakesTheEntriesThatNameIt(t *testing.T) {
	m, err := manifest.Parse([]byte(sharedDoc))
	if err != nil {
		t.Fatal(err)
	}
	files := m.ForUpstream("files")
	if len(files.Actions) != 2 || files.Tool("read_file") == nil || files.Tool("list_files") == nil || files.Tool("add_note") != nil {
		t.Errorf("files has actions %v; want read_file and list_files only", toolNames(files))
	}
	if files.Action("note.add") != nil || len(files.Resources) != 1 || len(files.Prompts) != 0 {
		t.Errorf("files holds another upstream's entries: %d resources, %d prompts", len(files.Resources), len(files.Prompts))
	}
	notes := m.ForUpstream("notes")
	if len(notes.Actions) != 1 || notes.Tool("add_note") == nil || notes.Prompt("summarize") == nil || len(notes.Resources) != 0 {
		t.Errorf("notes has actions %v, %d resources", toolNames(notes), len(notes.Resources))
	}
	if none := m.ForUpstream("other"); len(none.Checked()) != 0 {
		t.Errorf("an upstream no entry names got %d entries", len(none.Checked()))
	}
}

// TestUnionRefusesAnIntentTwice: the union of the upstreams' manifests
// holds every entry; an intent declared by two is refused, naming it, and
// a tool name two share names neither.
func TestUnionRefusesAnIntentTwice(t *testing.T) {
	m, err := manifest.Parse([]byte(sharedDoc))
	if err != nil {
		t.Fatal(err)
	}
	u, err := manifest.Union(m.ForUpstream("files"), m.ForUpstream("notes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Actions) != 3 || u.Tool("add_note") == nil || u.Action("file.read") == nil || u.Prompt("summarize") == nil {
		t.Errorf("union has actions %v", toolNames(u))
	}
	if _, err := manifest.Union(m, m.ForUpstream("files")); err == nil || !strings.Contains(err.Error(), `"file.read"`) {
		t.Errorf("an intent twice: err = %v; want one naming file.read", err)
	}
	other, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "disk.read", "entity": "disk", "action_type": "read", "description": "Reads", "operation_id": "read_file"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err = manifest.Union(m, other)
	if err != nil {
		t.Fatal(err)
	}
	if u.Tool("read_file") != nil || u.Action("disk.read") == nil || u.Action("file.read") == nil {
		t.Errorf("a tool name twice: Tool(read_file) = %v; want nil, both intents kept", u.Tool("read_file"))
	}
}

// TestUpstreamFieldChecked: upstream is a name (letters, digits, _ and -);
// anything else is a load error at its path.
func TestUpstreamFieldChecked(t *testing.T) {
	_, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "file.read", "entity": "file", "action_type": "read", "description": "Reads", "upstream": "a b"}]}`))
	if err == nil || !strings.Contains(err.Error(), "/actions/0/upstream") {
		t.Errorf("err = %v; want one at /actions/0/upstream", err)
	}
}

func toolNames(m *manifest.Manifest) []string {
	var out []string
	for _, a := range m.Actions {
		out = append(out, a.ToolName())
	}
	return out
}
