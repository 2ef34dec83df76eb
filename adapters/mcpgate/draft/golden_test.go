package draft_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/lint"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/draft"
	"github.com/axgate/axgate/adapters/mcpgate/internal/serverfs"
)

var update = flag.Bool("update", false, "rewrite the golden files of the drafts")

// golden compares got with the file testdata/draft/name of the mcpgate
// module, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", "testdata", "draft", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the draft (go test -run %s -update rewrites it after review):\n%s", path, t.Name(), got)
	}
}

// TestDraftServerFilesystem drafts the manifest of a real third-party MCP
// server, @modelcontextprotocol/server-filesystem at a pinned version, from
// the tools/list it answers over stdio, as axgate manifest init does, and
// compares the manifest and the guesses with golden files. The draft loads
// and passes lint at level basic.
func TestDraftServerFilesystem(t *testing.T) {
	cmd := serverfs.Command(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "axgate-manifest-init", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting %s: %v", cmd, err)
	}
	defer cs.Close()
	tools, err := draft.ListTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	server := cs.InitializeResult().ServerInfo
	out, guesses, err := draft.Draft(tools, draft.Options{
		ServerName: server.Name,
		Metadata:   map[string]any{"upstream": map[string]any{"name": server.Name, "version": server.Version}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := loadAndLint(t, out)
	if len(m.Actions) != len(tools) {
		t.Errorf("%d actions drafted of %d tools", len(m.Actions), len(tools))
	}
	for _, want := range []struct {
		tool, typ, risk string
		confirm         bool
	}{
		{"read_text_file", "read", "low", false},
		{"write_file", "write", "high", true},
		{"edit_file", "write", "high", true},
		{"move_file", "write", "high", true},
		{"create_directory", "write", "medium", false},
	} {
		a := m.Tool(want.tool)
		if a == nil {
			t.Errorf("no action for %s", want.tool)
			continue
		}
		if string(a.Type) != want.typ || string(a.RiskLevel) != want.risk || a.ConfirmationRequired != want.confirm {
			t.Errorf("%s: %s, %s risk, confirmation %v; want %s, %s, %v", want.tool, a.Type, a.RiskLevel, a.ConfirmationRequired, want.typ, want.risk, want.confirm)
		}
	}
	if w := lint.Lint(out, lint.LintOptions{Level: lint.LevelBasic}).Warnings(); len(w) > 0 {
		t.Errorf("lint warns about the draft: %v", w)
	}
	for _, tool := range tools {
		pin, err := mcpgate.ToolDigest(tool)
		if err != nil {
			t.Fatal(err)
		}
		if a := m.Tool(tool.Name); a == nil || a.UpstreamSHA256 != pin {
			t.Errorf("%s is not pinned to its digest %s", tool.Name, pin)
		}
	}
	golden(t, "server-filesystem.golden.json", out)
	var text strings.Builder
	for _, g := range guesses {
		text.WriteString(g.String())
		text.WriteByte('\n')
	}
	golden(t, "server-filesystem.guesses.golden.txt", []byte(text.String()))
}
