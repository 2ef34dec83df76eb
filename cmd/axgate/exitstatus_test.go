package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestExitStatusRuleForEveryCommand: one rule for every command (printed by
// "axgate help"): a file or program named on the command line that cannot
// be found or read is a usage error (2), naming the flag and the file; a
// file that is read but wrong is a failure (1). Before, serve and mcp
// exited 1 for a missing --manifest where lint exited 2, token 1 for a
// missing --key, config check 1 for a missing file, and --jwks errors did
// not name the flag.
func TestExitStatusRuleForEveryCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noKeys := write("nokeys.json", `{"keys":[]}`)
	notJSON := write("notjson.json", "hello\n")
	badConfig := write("bad.yaml", "listen: [\n")
	full := projectManifest("shop-full.json")
	invalid := projectManifest("invalid-risk-level.json")
	upstream := "http://127.0.0.1:1"
	serve := func(more ...string) []string {
		return append([]string{"serve", "--upstream", upstream, "--listen", "127.0.0.1:0", "--allow-unbound-conditions"}, more...)
	}
	mcp := func(more ...string) []string {
		return append([]string{"mcp", "--upstream-url", upstream + "/mcp", "--listen", "127.0.0.1:0", "--allow-unbound-conditions"}, more...)
	}
	mcpCmd := func(program string) []string {
		return []string{"mcp", "--manifest", full, "--anonymous", "--listen", "127.0.0.1:0", "--allow-unbound-conditions", "--upstream-command", program}
	}
	cases := []struct {
		name string
		args []string
		code int
		want string // the first line of stderr
	}{
		{"lint missing", []string{"lint", missing}, exitUsage, "axgate lint: " + missing + ": no such file"},
		{"lint invalid", []string{"lint", invalid}, exitFail, ""},
		{"tools missing", []string{"tools", missing}, exitUsage, "axgate tools: " + missing + ": no such file"},
		{"tools invalid", []string{"tools", invalid}, exitFail, "axgate tools: invalid AXAG manifest"},
		{"test missing suite", []string{"test", filepath.Join(dir, "missing.yaml")}, exitUsage, "axgate test: "},
		{"config check missing", []string{"config", "check", filepath.Join(dir, "missing.yaml")}, exitUsage, "axgate config: " + filepath.Join(dir, "missing.yaml") + ": no such file"},
		{"config check invalid", []string{"config", "check", badConfig}, exitFail, ""},
		{"token missing key", []string{"token", "principal", "--sub", "a", "--key", missing}, exitUsage, "axgate token: --key " + missing + ": no such file"},
		{"token invalid key", []string{"token", "principal", "--sub", "a", "--key", notJSON}, exitFail, "axgate token: --key " + notJSON + ": "},
		{"keys unwritable", []string{"keys", "gen", "--out", filepath.Join(notJSON, "sub")}, exitFail, "axgate keys: "},
		{"serve missing manifest", serve("--anonymous", "--manifest", missing), exitUsage, "axgate serve: --manifest " + missing + ": no such file"},
		{"serve invalid manifest", serve("--anonymous", "--manifest", invalid), exitFail, "axgate serve: invalid AXAG manifest"},
		{"serve missing jwks", serve("--manifest", full, "--jwks", missing), exitUsage, "axgate serve: --jwks " + missing + ": no such file"},
		{"serve jwks without keys", serve("--manifest", full, "--jwks", noKeys), exitFail, "axgate serve: --jwks " + noKeys + ": the key set holds no public key"},
		{"serve jwks not JSON", serve("--manifest", full, "--jwks", notJSON), exitFail, "axgate serve: --jwks " + notJSON + ": token: jwks: not valid JSON"},
		{"serve missing signing key", serve("--anonymous", "--manifest", full, "--signing-key", missing), exitUsage, "axgate serve: --signing-key " + missing + ": no such file"},
		{"serve missing config", serve("--config", filepath.Join(dir, "missing.yaml")), exitUsage, "axgate serve: --config " + filepath.Join(dir, "missing.yaml") + ": no such file"},
		{"mcp missing manifest", mcp("--anonymous", "--manifest", missing), exitUsage, "axgate mcp: --manifest " + missing + ": no such file"},
		{"mcp invalid manifest", mcp("--anonymous", "--manifest", invalid), exitFail, "axgate mcp: invalid AXAG manifest"},
		{"mcp missing jwks", mcp("--manifest", full, "--jwks", missing), exitUsage, "axgate mcp: --jwks " + missing + ": no such file"},
		{"mcp jwks without keys", mcp("--manifest", full, "--jwks", noKeys), exitFail, "axgate mcp: --jwks " + noKeys + ": the key set holds no public key"},
		{"mcp missing program", mcpCmd("axgate-no-such-program --flag"), exitUsage,
			`axgate mcp: --upstream-command: program "axgate-no-such-program" is not in the PATH of this process`},
		{"mcp missing program path", mcpCmd(missing), exitUsage, "axgate mcp: --upstream-command " + missing + ": no such file"},
		{"mcp program not executable", mcpCmd(notJSON), exitUsage, "axgate mcp: --upstream-command " + notJSON + ": is not executable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stderr, code := cliUntilListening(t, c.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != c.code || !strings.HasPrefix(first, c.want) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant it to begin with %q", code, c.code, stderr, c.want)
			}
		})
	}
}

// cliUntilListening runs the command in-process as cli does, but stops a
// gateway that starts listening (none of these cases should), so that the
// test fails rather than waits for ever.
func cliUntilListening(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{seen: ": listening", found: cancel}
	e := &env{stdout: io.Discard, stderr: w, getenv: func(string) string { return "" }}
	code = run(ctx, e, args)
	return w.String(), code
}

// watchWriter keeps what is written and calls found once it holds seen.
type watchWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	seen  string
	found func()
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.seen) {
		w.found()
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestHelpStatesTheExitRule: "axgate help" documents the rule.
func TestHelpStatesTheExitRule(t *testing.T) {
	t.Parallel()
	stdout, _, code := cli(t, nil, "help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit status, every command:", "0  success", "1  failure", "2  usage error", "a file or\n     program named on the command line that cannot be found or read"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("axgate help does not say %q:\n%s", want, stdout)
		}
	}
}

// TestStartFromAnotherDirectoryNamesThePaths: a desktop client starts the
// gateway from a working directory of its own, where the relative paths a
// user tried in a shell do not resolve. The real binary, started from
// another directory, names the file as given, the absolute path it tried
// and the working directory, for the manifest, the key set and the
// upstream program; before, it said only "open axag.json: no such file or
// directory" (exit 1), or the upstream's "connection closed".
func TestStartFromAnotherDirectoryNamesThePaths(t *testing.T) {
	t.Parallel()
	bin := buildAxgate(t)
	elsewhere, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := filepath.Abs(projectManifest("shop-full.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, what string
		args       []string
	}{
		{"manifest", "--manifest axag.json", []string{"--manifest", "axag.json", "--upstream-command", "/bin/true"}},
		{"key set", "--jwks keys/jwks.json", []string{"--manifest", full, "--upstream-command", "/bin/true", "--jwks", "keys/jwks.json"}},
		{"upstream program", "--upstream-command ./server.py", []string{"--manifest", full, "--upstream-command", "./server.py --root files"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"mcp", "--stdio", "--local-user", "me"}, c.args...)...)
			cmd.Dir = elsewhere
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
				t.Fatalf("exit %v, want %d; stderr:\n%s", err, exitUsage, &stderr)
			}
			rel := strings.Fields(c.what)[1]
			want := "axgate mcp: " + c.what + ": no such file (looked for " + filepath.Join(elsewhere, rel) +
				": a relative path is read from the working directory, " + elsewhere + "; give an absolute path)\n"
			if stderr.String() != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", &stderr, want)
			}
		})
	}
}

// TestUnboundConditionsNameTheFlags: serve and mcp with conditions bound to
// nothing name the flags that bind them (--precondition 'NAME=EXPR',
// --allow-unbound-conditions), not the library's Go options, and the
// library's "axgate: " prefix does not follow the command's.
func TestUnboundConditionsNameTheFlags(t *testing.T) {
	t.Parallel()
	full := projectManifest("shop-full.json")
	for _, args := range [][]string{
		{"serve", "--manifest", full, "--anonymous", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
		{"mcp", "--manifest", full, "--anonymous", "--upstream-url", "http://127.0.0.1:1/mcp", "--listen", "127.0.0.1:0"},
	} {
		t.Run(args[0], func(t *testing.T) {
			stderr, code := cliUntilListening(t, args...)
			want := "axgate " + args[0] + `: 5 preconditions are not bound to a check: "cart is not empty" (/actions/2/preconditions/0); "no active subscriptions" (/actions/3/preconditions/0); "no pending orders" (/actions/3/preconditions/1); "payment method is set" (/actions/2/preconditions/2); "shipping address is valid" (/actions/2/preconditions/1)
5 postconditions are not bound to a check: "account deactivated" (/actions/3/postconditions/0); "cart cleared" (/actions/2/postconditions/1); "confirmation email sent" (/actions/2/postconditions/2); "data retention period started" (/actions/3/postconditions/1); "order created" (/actions/2/postconditions/0)
to fix: bind each to a CEL expression over the call (args, principal): --precondition 'NAME=EXPR' for a precondition, --postcondition 'NAME=EXPR' for a postcondition, one flag per condition (e.g. --precondition 'cart is not empty=EXPR'); or start anyway with --allow-unbound-conditions, which lets the calls pass those conditions unchecked, recording a warning
`
			if code != exitFail || !strings.HasSuffix(stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant it to end with:\n%s", code, stderr, want)
			}
			for _, goWord := range []string{"axgate.With", "WithPrecondition", "axgate: axgate", ": axgate: "} {
				if strings.Contains(stderr, goWord) {
					t.Errorf("the error names %q, not a flag:\n%s", goWord, stderr)
				}
			}
		})
	}
}
