package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewriteBuildsTheOldShopExample: the shop example as it was written
// against the pre-v1 API (testdata/shop, plus a file that uses every renamed
// name) does not build against today's axgate, and builds once rewritten.
func TestRewriteBuildsTheOldShopExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shop := filepath.Join(dir, "shop")
	if err := os.Mkdir(shop, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(root, "examples/shop/go.mod"), filepath.Join(shop, "go.mod"))
	copyFile(t, filepath.Join(root, "examples/shop/go.sum"), filepath.Join(shop, "go.sum"))
	copyFile(t, "testdata/shop/shop.json", filepath.Join(shop, "shop.json"))
	olds, _ := filepath.Glob("testdata/shop/*.go.old")
	if len(olds) == 0 {
		t.Fatal("no testdata/shop/*.go.old")
	}
	for _, o := range olds {
		copyFile(t, o, filepath.Join(shop, strings.TrimSuffix(filepath.Base(o), ".old")))
	}
	work := writeWork(t, root, dir, shop)

	if out, err := goBuild(shop, work); err == nil {
		t.Fatalf("the old example builds against today's API without the rewrite:\n%s", out)
	}
	for _, o := range olds {
		fn := filepath.Join(shop, strings.TrimSuffix(filepath.Base(o), ".old"))
		src, err := os.ReadFile(fn)
		if err != nil {
			t.Fatal(err)
		}
		out, notes, err := Rewrite(fn, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) > 0 {
			t.Errorf("%s: unexpected notes: %v", fn, notes)
		}
		if err := os.WriteFile(fn, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := goBuild(shop, work); err != nil {
		t.Fatalf("the rewritten example does not build: %v\n%s", err, out)
	}
	// A second run changes nothing.
	for _, o := range olds {
		fn := filepath.Join(shop, strings.TrimSuffix(filepath.Base(o), ".old"))
		src, _ := os.ReadFile(fn)
		out, _, err := Rewrite(fn, src)
		if err != nil || string(out) != string(src) {
			t.Errorf("%s: a second rewrite changed it (err %v)", fn, err)
		}
	}
}

// TestRewriteReportsRemovedNames: a name with no mechanical replacement is
// reported with its position, and the file is left as it was.
func TestRewriteReportsRemovedNames(t *testing.T) {
	src := []byte(`package p

import "github.com/axgate/axgate/gates"

var _ = gates.NewAccess
`)
	out, notes, err := Rewrite("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(src) || len(notes) != 1 || !strings.Contains(notes[0], "p.go:5:9: gates.NewAccess: removed") {
		t.Fatalf("Rewrite = %q, notes %q", out, notes)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeWork writes a go.work in dir: the repository's, with its modules by
// absolute path and shop in place of examples/shop.
func writeWork(t *testing.T, root, dir, shop string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "./examples/shop":
			line = "\t" + shop
		case strings.HasPrefix(trimmed, "./") || trimmed == ".":
			line = "\t" + filepath.Join(root, trimmed)
		case strings.HasPrefix(trimmed, "replace "):
			i := strings.LastIndex(line, "=> ./")
			if i >= 0 {
				line = line[:i] + "=> " + filepath.Join(root, line[i+3:])
			}
		}
		b.WriteString(line + "\n")
	}
	work := filepath.Join(dir, "go.work")
	if err := os.WriteFile(work, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err := os.ReadFile(filepath.Join(root, "go.work.sum")); err == nil {
		os.WriteFile(filepath.Join(dir, "go.work.sum"), sum, 0o644)
	}
	return work
}

func goBuild(dir, work string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+work, "GOFLAGS=-mod=readonly")
	return cmd.CombinedOutput()
}

// TestRewriteWritesWireStringsForTheirConstants: constants whose values are
// wire strings (JWS algorithms, token reasons, lint rule ids, the adapters'
// credential headers) become the strings, typed where the old constant was,
// and an import left unused goes.
func TestRewriteWritesWireStringsForTheirConstants(t *testing.T) {
	src := []byte(`package p

import (
	"net/http"

	"github.com/axgate/axgate/adapters/wire"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
)

func f(h http.Header, te *token.Error, rule string) bool {
	h.Set(wire.HeaderTenant, "acme")
	return te.Reason == token.ReasonUsed && rule == manifest.RuleSchema && token.AlgEdDSA != ""
}
`)
	want := `package p

import (
	"net/http"

	"github.com/axgate/axgate/token"
)

func f(h http.Header, te *token.Error, rule string) bool {
	h.Set("X-AXAG-Tenant", "acme")
	return te.Reason == token.Reason("already_used") && rule == "AXGATE-SCHEMA" && "EdDSA" != ""
}
`
	out, notes, err := Rewrite("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want || len(notes) != 0 {
		t.Fatalf("Rewrite =\n%s\nnotes %q, want\n%s", out, notes, want)
	}
}
