package childproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestInterpreterOfAScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "node"), []byte{0x7f, 'E', 'L', 'F'}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ line, want string }{
		{"#!/usr/bin/env node\n", filepath.Join(bin, "node")},
		{"#!/usr/bin/env -S node --no-warnings\n", filepath.Join(bin, "node")},
		{"#! /opt/py/bin/python3 -u\n", "/opt/py/bin/python3"},
		{"#!/usr/bin/env missing\n", ""},
		{"\x7fELF", ""},
	} {
		script := filepath.Join(dir, "script")
		if err := os.WriteFile(script, []byte(c.line+"rest\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if got := interpreter(script, bin); got != c.want {
			t.Errorf("interpreter of %q = %q, want %q", c.line, got, c.want)
		}
	}
}

func TestProgramInNodeModulesBindsTheTree(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "node_modules")
	main := filepath.Join(tree, "@scope", "server", "dist", "index.js")
	link := filepath.Join(tree, ".bin", "server")
	for _, d := range []string{filepath.Dir(main), filepath.Dir(link)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(main, []byte("#!/usr/bin/env node\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@scope/server/dist/index.js", link); err != nil {
		t.Fatal(err)
	}
	got := programMounts(link, func(string) bool { return false })
	if want := []mount{{"--ro-bind", tree, tree}}; !slices.Equal(got, want) {
		t.Errorf("programMounts(%s) = %v, want %v", link, got, want)
	}
	other := filepath.Join(dir, "tool")
	if err := os.WriteFile(other, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(dir, "alias")
	if err := os.Symlink(other, alias); err != nil {
		t.Fatal(err)
	}
	got = programMounts(alias, func(string) bool { return false })
	if want := []mount{{"--ro-bind", other, other}, {"--symlink", other, alias}}; !slices.Equal(got, want) {
		t.Errorf("programMounts(%s) = %v, want %v", alias, got, want)
	}
}

func TestSandboxPathsChecked(t *testing.T) {
	for _, s := range []Sandbox{{ReadOnly: []string{"relative"}}, {Writable: []string{filepath.Join(t.TempDir(), "missing")}}} {
		if err := s.Check(); err == nil {
			t.Errorf("Check(%+v) passed", s)
		}
	}
}
