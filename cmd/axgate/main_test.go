package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixedNow is the clock of every golden report.
const fixedNow = "2026-03-21T10:00:00Z"

// projectManifest is a path to one of the project's own test manifests
// (testdata/axag at the repository's root), relative to this package's
// directory (go test runs in it).
func projectManifest(name string) string { return fixtures.Manifest(name) }

// cli runs the command in-process, as the binary would with these
// arguments, and returns its output and exit status.
func cli(t *testing.T, environ map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return environ[k] }}
	code = run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/axgate -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout, or stderr when the code is not 0
	}{
		{"no command", nil, exitUsage, "Usage: axgate COMMAND"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"help", []string{"help"}, exitOK, "Commands:"},
		{"help lint", []string{"help", "lint"}, exitOK, "--prune"},
		{"lint -h", []string{"lint", "-h"}, exitOK, "AXGATE_LINT_NOW"},
		{"lint without manifest", []string{"lint"}, exitUsage, "want exactly one MANIFEST"},
		{"lint two manifests", []string{"lint", "a.json", "b.json"}, exitUsage, "want exactly one MANIFEST"},
		{"lint bad format", []string{"lint", "--format", "xml", "m.json"}, exitUsage, "--format must be text or json"},
		{"lint bad level", []string{"lint", "--level", "gold", "m.json"}, exitUsage, "unknown conformance level"},
		{"lint unknown flag", []string{"lint", "--colour", "m.json"}, exitUsage, "unknown flag --colour"},
		{"lint missing file", []string{"lint", "testdata/manifests/nope.json"}, exitUsage, "no such file"},
		{"tools bad format", []string{"tools", "--format", "gemini", "m.json"}, exitUsage, "--format must be mcp, openai or anthropic"},
		{"tools without manifest", []string{"tools"}, exitUsage, "want exactly one MANIFEST"},
		{"keys without subcommand", []string{"keys"}, exitUsage, "keys gen"},
		{"token without kind", []string{"token"}, exitUsage, "principal|confirmation|approval"},
		{"serve without manifest", []string{"serve", "--upstream", "http://127.0.0.1:1"}, exitUsage, "--manifest is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, nil, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			where := stdout
			if c.code != exitOK {
				where = stderr
			}
			if !strings.Contains(where, c.out) {
				t.Errorf("output does not mention %q:\nstdout: %s\nstderr: %s", c.out, stdout, stderr)
			}
		})
	}
}
