package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/internal/lint"
	"github.com/axgate/axgate/manifest"
)

type lintCase struct {
	name  string // golden file base name
	file  string
	flags []string
	code  int
}

func lintCases() []lintCase {
	local := func(name string, code int, flags ...string) lintCase {
		return lintCase{name: name, file: filepath.Join("testdata", "manifests", name+".json"), flags: flags, code: code}
	}
	return []lintCase{
		// The project's example manifests (testdata/axag at the root).
		{name: "shop-basic", file: projectManifest("shop-basic.json"), code: exitOK},
		{name: "shop-full", file: projectManifest("shop-full.json"), code: exitOK},
		{name: "invalid-action-type", file: projectManifest("invalid-action-type.json"), code: exitFail},
		{name: "invalid-risk-level", file: projectManifest("invalid-risk-level.json"), code: exitFail},
		{name: "invalid-missing-intent", file: projectManifest("invalid-missing-intent.json"), code: exitFail},
		{name: "shop-basic-at-intermediate", file: projectManifest("shop-basic.json"), flags: []string{"--level", "intermediate"}, code: exitFail},
		// One manifest per rule (testdata/manifests).
		local("parse-error", exitFail),
		local("duplicate-key", exitFail),
		local("schema", exitFail),
		local("semantic", exitFail),
		local("risk-without-confirmation", exitOK),
		local("mutation-without-idempotent", exitOK),
		local("param-overlap", exitFail),
		local("scope-missing", exitOK),
		local("approval-without-roles", exitFail),
		local("level-intermediate", exitOK),
		{name: "level-intermediate-at-intermediate", file: filepath.Join("testdata", "manifests", "level-intermediate.json"), flags: []string{"--level", "intermediate"}, code: exitFail},
		local("level-full", exitFail),
		local("precondition-cycle", exitFail),
		local("mixed", exitFail),
		local("constraints", exitFail),
		{name: "reference-yaml", file: filepath.Join("testdata", "manifests", "reference.yaml"), code: exitFail},
	}
}

// conformanceLintCases are the reference corpus's example manifests
// (../shared/spec/axag), linted when the corpus is there.
func conformanceLintCases(dir string) []lintCase {
	shared := func(name, file string, code int, flags ...string) lintCase {
		return lintCase{name: name, file: filepath.Join(dir, file), flags: flags, code: code}
	}
	return []lintCase{
		shared("shared-valid-basic", "valid-basic.json", exitOK),
		shared("shared-valid-full", "valid-full.json", exitOK),
		shared("shared-invalid-bad-action-type", "invalid-bad-action-type.json", exitFail),
		shared("shared-invalid-bad-risk-level", "invalid-bad-risk-level.json", exitFail),
		shared("shared-invalid-missing-intent", "invalid-missing-intent.json", exitFail),
		shared("shared-valid-basic-at-intermediate", "valid-basic.json", exitFail, "--level", "intermediate"),
	}
}

func TestLintGolden(t *testing.T) { lintGolden(t, lintCases()) }

// TestConformanceLintGolden lints the reference corpus when it is there.
func TestConformanceLintGolden(t *testing.T) {
	t.Parallel()
	lintGolden(t, conformanceLintCases(fixtures.Corpus(t)))
}

func lintGolden(t *testing.T, cases []lintCase) {
	environ := map[string]string{"AXGATE_LINT_NOW": fixedNow}
	for _, c := range cases {
		for _, format := range []string{"text", "json"} {
			t.Run(c.name+"/"+format, func(t *testing.T) {
				args := append([]string{"lint", c.file, "--format", format}, c.flags...)
				stdout, stderr, code := cli(t, environ, args...)
				if code != c.code {
					t.Fatalf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
				}
				if stderr != "" {
					t.Errorf("unexpected stderr: %s", stderr)
				}
				ext := ".txt"
				if format == "json" {
					ext = ".json"
					var rep lint.GradeReport
					if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
						t.Fatalf("the JSON report does not parse: %v", err)
					}
					wantStatus := lint.StatusPass
					if c.code == exitFail {
						wantStatus = lint.StatusFail
					}
					if rep.Deterministic.Status != wantStatus {
						t.Errorf("status %s, want %s", rep.Deterministic.Status, wantStatus)
					}
					if rep.Timestamp != fixedNow || rep.ValidatorVersion != lint.ValidatorVersion {
						t.Errorf("timestamp %q, validator %q", rep.Timestamp, rep.ValidatorVersion)
					}
					if (rep.Grade == "F") != (wantStatus == lint.StatusFail) {
						t.Errorf("grade %s with status %s", rep.Grade, rep.Deterministic.Status)
					}
					for _, f := range append(rep.Deterministic.Errors, rep.Deterministic.Warnings...) {
						if f.Rule == "" || f.Fix == "" || (f.Path != "" && f.Path[0] != '/') {
							t.Errorf("finding without rule, fix or JSON Pointer: %+v", f)
						}
					}
				}
				golden(t, filepath.Join("lint", c.name+ext), stdout)
			})
		}
	}
}

// TestLintCoversEveryRule checks that the golden cases exercise every rule,
// so that a rule without a manifest that triggers it is noticed.
func TestLintCoversEveryRule(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range lintCases() {
		opts := lintOptions()
		if i := slices.Index(c.flags, "--level"); i >= 0 {
			opts.Level = lint.Level(c.flags[i+1])
		}
		res, err := lint.LintFile(c.file, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Findings {
			seen[f.Rule] = true
		}
	}
	for _, r := range lint.Rules {
		if !seen[r.ID] {
			t.Errorf("no test manifest triggers %s (%s)", r.ID, r.Title)
		}
	}
}

func TestLintPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	environ := map[string]string{"AXGATE_LINT_NOW": fixedNow}
	normalize := func(s string) string { return strings.ReplaceAll(s, dir, "$TMP") }

	cases := []struct {
		name, file string
		removed    []string
		kept       []string
	}{
		{"mixed", "mixed.json", []string{"order.refund", "account.close"}, []string{"product.search", "cart.add_item"}},
		// Removing order.place breaks the cycle; session.renew needs what
		// only it produces.
		{"precondition-cycle", "precondition-cycle.json", []string{"order.place", "session.renew"}, []string{"payment.authorize", "invoice.issue", "product.search"}},
		{"reference-yaml", "reference.yaml", []string{"ticket.escalate"}, []string{"ticket.create"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+".pruned.json")
			in := filepath.Join("testdata", "manifests", c.file)
			stdout, stderr, code := cli(t, environ, "lint", in, "--prune", out)
			if code != exitFail {
				t.Fatalf("exit %d, want 1 (the manifest as given fails)\n%s%s", code, stdout, stderr)
			}
			golden(t, filepath.Join("lint", "prune-"+c.name+".txt"), normalize(stdout))

			// The pruned manifest passes, and holds exactly the kept actions.
			res, err := lint.LintFile(out, lint.LintOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Passed() {
				t.Fatalf("the pruned manifest fails: %v", res.Errors())
			}
			var kept []string
			for _, a := range res.Actions {
				kept = append(kept, a.Intent)
			}
			if !slices.Equal(kept, c.kept) {
				t.Errorf("kept %v, want %v", kept, c.kept)
			}
			if _, err := manifest.LoadFile(out); err != nil {
				t.Errorf("the pruned manifest does not load: %v", err)
			}

			stdout, _, _ = cli(t, environ, "lint", in, "--prune", out, "--format", "json")
			var rep struct {
				Pruned pruneResult `json:"pruned"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatal(err)
			}
			var removed []string
			for _, a := range rep.Pruned.Removed {
				removed = append(removed, a.Intent)
			}
			if !slices.Equal(removed, c.removed) || rep.Pruned.Output != out || !slices.Equal(rep.Pruned.Remaining, c.kept) {
				t.Errorf("pruned %+v, want removed %v kept %v", rep.Pruned, c.removed, c.kept)
			}
		})
	}

	t.Run("document-level error", func(t *testing.T) {
		out := filepath.Join(dir, "schema.pruned.json")
		stdout, stderr, code := cli(t, environ, "lint", filepath.Join("testdata", "manifests", "schema.json"), "--prune", out)
		if code != exitFail {
			t.Fatalf("exit %d", code)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a manifest that still fails was written: %v", err)
		}
		if !strings.Contains(stdout, "Pruned: nothing written") || !strings.Contains(stderr, "/version") {
			t.Errorf("the refusal does not say why:\n%s\n%s", stdout, stderr)
		}
	})
}

func TestLintClock(t *testing.T) {
	t.Parallel()
	file := projectManifest("shop-basic.json")
	stdout, _, code := cli(t, map[string]string{"SOURCE_DATE_EPOCH": "1700000000"}, "lint", file, "--format", "json")
	if code != exitOK || !strings.Contains(stdout, `"timestamp": "2023-11-14T22:13:20Z"`) {
		t.Errorf("SOURCE_DATE_EPOCH not used (exit %d):\n%s", code, stdout)
	}
	_, stderr, code := cli(t, map[string]string{"AXGATE_LINT_NOW": "yesterday"}, "lint", file)
	if code != exitUsage || !strings.Contains(stderr, "AXGATE_LINT_NOW") {
		t.Errorf("a bad AXGATE_LINT_NOW is not a usage error (exit %d): %s", code, stderr)
	}
}

func TestLintNoColorWhenNotATerminal(t *testing.T) {
	t.Parallel()
	stdout, _, _ := cli(t, map[string]string{"AXGATE_LINT_NOW": fixedNow}, "lint", projectManifest("invalid-risk-level.json"))
	if strings.Contains(stdout, "\x1b[") {
		t.Errorf("colour escapes in output to a buffer:\n%q", stdout)
	}
	// A regular file is not a terminal either.
	f, err := os.Create(filepath.Join(t.TempDir(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c := colorsFor(f, func(string) string { return "" }); c != (colors{}) {
		t.Errorf("colours for a regular file: %+v", c)
	}
}

func TestLintRulesTable(t *testing.T) {
	t.Parallel()
	stdout, _, code := cli(t, nil, "lint", "--rules")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, r := range lint.Rules {
		if !strings.Contains(stdout, r.ID) {
			t.Errorf("--rules does not list %s", r.ID)
		}
	}
}
