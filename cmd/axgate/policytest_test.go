package main

import (
	"bufio"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// suiteDir holds the runner's own suites and their manifest.
const suiteDir = "testdata/policytest"

// junitTimes matches the time attributes of JUnit XML, which golden files
// cannot hold.
var junitTimes = regexp.MustCompile(`time="[0-9.]+"`)

// TestTestGolden runs the suites of testdata/policytest (passing, failing,
// broken, several at once) and compares the output and the JUnit XML with
// testdata/golden/test (-update rewrites them).
func TestTestGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"pass", []string{suiteDir + "/pass.yaml", "-v"}, exitOK},
		{"fail", []string{suiteDir + "/fail.yaml"}, exitFail},
		{"broken", []string{suiteDir + "/broken.yaml"}, exitUsage},
		{"several", []string{suiteDir + "/pass.yaml", suiteDir + "/fail.yaml", suiteDir + "/broken.yaml",
			"--run", "^(a read, by tool name|passes|another code)$"}, exitUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			junit := filepath.Join(t.TempDir(), "junit.xml")
			args := append([]string{"test", "--junit", junit}, c.args...)
			stdout, stderr, code := cli(t, nil, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			golden(t, filepath.Join("test", c.name+".txt"), stdout+"-- stderr --\n"+stderr)
			raw, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("test", c.name+".xml"), junitTimes.ReplaceAllString(string(raw), `time="T"`))
			checkJUnit(t, raw, stdout)
		})
	}
}

// checkJUnit reads the JUnit XML back and checks its counts against the
// cases and the PASS/FAIL/ERROR lines printed.
func checkJUnit(t *testing.T, raw []byte, stdout string) {
	t.Helper()
	var doc junitSuites
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the JUnit XML does not parse: %v", err)
	}
	var tests, failures, errs int
	for _, s := range doc.Suites {
		var f, e int
		for _, c := range s.Cases {
			if c.Failure != nil {
				f++
			}
			if c.Error != nil {
				e++
			}
		}
		if s.Tests != len(s.Cases) || s.Failures != f || s.Errors != e {
			t.Errorf("suite %s: tests=%d failures=%d errors=%d, but it holds %d cases, %d failures, %d errors",
				s.Name, s.Tests, s.Failures, s.Errors, len(s.Cases), f, e)
		}
		tests, failures, errs = tests+s.Tests, failures+s.Failures, errs+s.Errors
	}
	if doc.Tests != tests || doc.Failures != failures || doc.Errors != errs {
		t.Errorf("testsuites: tests=%d failures=%d errors=%d, its suites add up to %d, %d, %d",
			doc.Tests, doc.Failures, doc.Errors, tests, failures, errs)
	}
	n := 0
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "FAIL  ") {
			n++
		}
	}
	if n != failures {
		t.Errorf("%d FAIL lines, %d failures in the JUnit XML", n, failures)
	}
}

// TestShopPolicySuite runs the suite examples/shop ships, as CI does.
func TestShopPolicySuite(t *testing.T) {
	t.Parallel()
	junit := filepath.Join(t.TempDir(), "junit.xml")
	stdout, stderr, code := cli(t, nil, "test", filepath.Join("..", "..", "examples", "shop", "policy_test.yaml"), "--junit", junit)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "PASS: ") || strings.Contains(stdout, "FAIL") {
		t.Errorf("stdout:\n%s", stdout)
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	checkJUnit(t, raw, stdout)
	// The suite covers what the brief of the shop's suite asks for.
	for _, want := range []string{"AXAG_TENANT_BOUNDARY", "AXAG_ROLE_INSUFFICIENT", "violations:", "AXAG_CONFIRMATION_MISSING",
		"confirmation: true", "AXAG_APPROVAL_MISSING", "approvals:", "AXAG_RATE_LIMITED", "expect: allow"} {
		suite, err := os.ReadFile(filepath.Join("..", "..", "examples", "shop", "policy_test.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(suite), want) {
			t.Errorf("the shop's suite has no %q", want)
		}
	}
}

// TestTestSuiteInCLIDoc runs the suite docs/cli.md shows (its ```yaml block
// under "## axgate test") against the shop's manifest.
func TestTestSuiteInCLIDoc(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block []string
	section, in, found := false, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			section = strings.HasPrefix(line, "## axgate test")
		case section && !found && line == "```yaml":
			in = true
		case in && line == "```":
			in, found = false, true
		case in:
			block = append(block, line)
		}
	}
	if !found {
		t.Fatal(`docs/cli.md has no yaml block under "## axgate test"`)
	}
	path := filepath.Join(t.TempDir(), "readme.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(block, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shop := filepath.Join("..", "..", "examples", "shop", "shop.json")
	stdout, stderr, code := cli(t, nil, "test", path, "--manifest", shop)
	if code != exitOK {
		t.Fatalf("docs/cli.md's suite: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestTestUsage(t *testing.T) {
	t.Parallel()
	unwritable := filepath.Join(t.TempDir(), "no", "such", "dir", "junit.xml")
	cases := []struct {
		name string
		args []string
		out  string // in stdout or stderr
	}{
		{"no suite", []string{"test"}, "want at least one SUITE"},
		{"bad --run", []string{"test", suiteDir + "/pass.yaml", "--run", "("}, "--run: error parsing regexp"},
		{"no case matches", []string{"test", suiteDir + "/pass.yaml", "--run", "nothing like it"}, `no case matches --run "nothing like it"`},
		{"missing suite", []string{"test", suiteDir + "/nope.yaml"}, "no such file"},
		{"unwritable junit", []string{"test", suiteDir + "/pass.yaml", "--junit", unwritable}, "--junit:"},
		{"unknown flag", []string{"test", "--junitxml", "x", suiteDir + "/pass.yaml"}, "unknown flag --junitxml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, nil, c.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stdout+stderr, c.out) {
				t.Errorf("output does not mention %q:\nstdout: %s\nstderr: %s", c.out, stdout, stderr)
			}
		})
	}
	stdout, _, code := cli(t, nil, "help", "test")
	if code != exitOK {
		t.Fatalf("help test: exit %d", code)
	}
	for _, flag := range []string{"-manifest", "-junit", "-run", "-v", "Exit status"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("help test does not mention %s:\n%s", flag, stdout)
		}
	}
	stdout, _, _ = cli(t, nil, "help")
	if !strings.Contains(stdout, "  test ") {
		t.Errorf("help does not list the test command:\n%s", stdout)
	}
}

// TestTestManifestFlag: --manifest replaces the manifest a suite names,
// and a suite that names none needs it.
func TestTestManifestFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orig, err := os.ReadFile(filepath.Join(suiteDir, "docs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// doc.read for admins only: the suite's first case no longer passes.
	stricter := strings.Replace(string(orig), "    scope: global\n", "    scope: global\n    required_roles: [admin]\n", 1)
	if stricter == string(orig) {
		t.Fatal("the manifest did not change")
	}
	m := filepath.Join(dir, "stricter.yaml")
	if err := os.WriteFile(m, []byte(stricter), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, nil, "test", suiteDir+"/pass.yaml", "--manifest", m, "--run", "^a read")
	if code != exitFail || !strings.Contains(stdout, "FAIL  a read, by tool name") || !strings.Contains(stdout, "AXAG_ROLE_INSUFFICIENT") {
		t.Errorf("with --manifest: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	nameless := filepath.Join(dir, "nameless.yaml")
	suite := "principals:\n  ann: {roles: [admin]}\ncases:\n  - {name: read, principal: ann, intent: doc.read, arguments: {doc_id: d1}, expect: allow}\n" +
		"options: {allow_unbound_conditions: true}\n"
	if err := os.WriteFile(nameless, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := cli(t, nil, "test", nameless, "--manifest", m); code != exitOK {
		t.Errorf("a suite without manifest:, with --manifest: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, stderr, code := cli(t, nil, "test", nameless); code != exitUsage || !strings.Contains(stderr, "names no manifest") {
		t.Errorf("a suite without manifest: and without --manifest: exit %d\nstderr: %s", code, stderr)
	}
}

// TestTestCaseError: a case that cannot run (here its conditions make no
// enforcer, which loadSuite otherwise refuses beforehand) is an ERROR, not
// a FAIL.
func TestTestCaseError(t *testing.T) {
	t.Parallel()
	m, err := manifest.LoadFile(filepath.Join(suiteDir, "docs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("test")
	if err != nil {
		t.Fatal(err)
	}
	r := &testRunner{e: &env{}, signer: signer}
	s := &suite{path: "x.yaml", m: m, options: suiteOptions{allowUnbound: true}}
	c := testCase{name: "bad expression", conditions: map[string]conditionOutcome{"doc is public": {expr: "args.doc_id >"}},
		steps: []testStep{{principal: middleware.Principal{ID: "ann"}, tool: "doc_read", args: []byte(`{"doc_id":"d1"}`), expect: expectation{outcome: outcomeAllow}}}}
	res := r.runCase(context.Background(), s, c)
	if res.status != statusError || !strings.Contains(res.message, "no enforcer") {
		t.Errorf("status %s, message %q", res.status, res.message)
	}
	c.conditions = nil
	if res := r.runCase(context.Background(), s, c); res.status != statusPass {
		t.Errorf("without the bad expression: status %s: %v", res.status, res.lines)
	}
}

// TestTestArgumentsJSON: YAML arguments become the JSON a case means,
// numbers with the digits written.
func TestTestArgumentsJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		yaml, json, problem string
	}{
		{`{a: 1, b: 1.50, c: 12345678901234567890123, d: -0.0, e: 1e400}`, `{"a":1,"b":1.50,"c":12345678901234567890123,"d":-0.0,"e":1e400}`, ""},
		{`{a: 0x1F, b: 0o17, c: +5, d: .5, e: +1.5}`, `{"a":31,"b":15,"c":5,"d":0.5,"e":1.5}`, ""},
		{`{a: 2026-03-21, b: "007", c: ~, d: true, e: [x, {f: null}], g: ""}`, `{"a":"2026-03-21","b":"007","c":null,"d":true,"e":["x",{"f":null}],"g":""}`, ""},
		{`{a: "1e400", b: '12', c: !!str 1}`, `{"a":"1e400","b":"12","c":"1"}`, ""},
		{`{a: &x {b: 1}, c: *x}`, `{"a":{"b":1},"c":{"b":1}}`, ""},
		{`{a: 1, a: 2}`, "", `duplicate key "a"`},
		{`{a: .inf}`, "", "cannot be written as JSON"},
		{`{<<: {a: 1}}`, "", "merge keys"},
	}
	for _, c := range cases {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(c.yaml), &n); err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		d := &yamlDoc{file: "f.yaml"}
		got, ok := d.toJSON(&n, "arguments")
		problems := strings.Join(d.report(), "\n")
		if c.problem != "" {
			if ok || !strings.Contains(problems, c.problem) {
				t.Errorf("%s: ok %v, problems %q, want %q", c.yaml, ok, problems, c.problem)
			}
			continue
		}
		if !ok || string(got) != c.json {
			t.Errorf("%s: got %s (ok %v, %s), want %s", c.yaml, got, ok, problems, c.json)
		}
	}
}
