package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
)

// envManifest declares the env and hold tools of the test binary as an MCP
// server on stdio (serveEnvUpstream).
var envManifest = filepath.Join("testdata", "mcp", "env.axag.json")

// writeTestFile writes body to name in dir and returns its path.
func writeTestFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUpstreamsConfigCheckShowsEachUpstreamWithoutSecrets: a file with
// upstreams: is valid for mcp, and config check shows each upstream (what
// it runs or reaches, its manifest, prefix, credentials' files, sandbox,
// bounds) but no value of env:, no password of a URL and nothing of a
// secret file.
func TestUpstreamsConfigCheckShowsEachUpstreamWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	secret := writeTestFile(t, dir, "secret", "client-s3cr3t\n")
	p := writeTestFile(t, dir, "axgate.yaml", `
anonymous: true
tool_separator: "."
upstreams:
  - name: shell
    command: /bin/echo hello
    args: [world]
    env: {GREETING: env-s3cr3t}
    manifest: `+envManifest+`
    sandbox: {mode: optional, ro: [/usr]}
    call_timeout: 5s
    max_tools: 50
  - name: echo
    url: https://user:url-s3cr3t@echo.example/mcp
    prefix: talk_
    credentials:
      header_files: {X-Api-Key: /run/secrets/echo-key}
      token_exchange:
        token_url: https://idp.example/token
        client_id: axgate
        client_secret_file: `+secret+`
        audience: echo
`)
	out, stderr, code := cli(t, nil, "config", "check", "--command", "mcp", p)
	if code != exitOK {
		t.Fatalf("config check: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"upstream shell: command /bin/echo hello world (tools shell.…)",
		"manifest " + envManifest,
		"env GREETING (values not shown)",
		"sandbox optional ro /usr",
		"call_timeout 5s, max_tools 50",
		"upstream echo: url https://user:xxxxx@echo.example/mcp (tools talk_…)",
		"credentials header X-Api-Key from file /run/secrets/echo-key",
		"credentials token_exchange at https://idp.example/token as axgate for audience echo (secret from file " + secret + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("config check shows a secret:\n%s", out)
	}
}

// TestUpstreamsConfigRefused: each mistake of an upstreams: section is an
// error at its line, and nothing starts.
func TestUpstreamsConfigRefused(t *testing.T) {
	cases := []struct {
		name, body string
		want       string
	}{
		{"unknown key", "upstreams:\n  - name: a\n    url: http://a/mcp\n    timeout: 5s\n", `:4:5: upstreams[0]: unknown key "timeout"`},
		{"misspelt key", "upstreams:\n  - name: a\n    url: http://a/mcp\n    call_timout: 5s\n", `(did you mean "call_timeout"?)`},
		{"two of one name", "upstreams:\n  - name: a\n    url: http://a/mcp\n  - name: a\n    url: http://b/mcp\n", `:4:1: upstreams: upstreams[0] and upstreams[1] are both named "a"`},
		{"prefixes collide", "upstreams:\n  - name: a\n    url: http://a/mcp\n  - name: b\n    prefix: a_\n    url: http://b/mcp\n", `:4:1: upstreams: the tool prefixes of a and b are both "a_": each upstream needs its own`},
		{"bad separator", "tool_separator: \"/\"\nupstreams:\n  - name: a\n    url: http://a/mcp\n", `:1:17: tool_separator: want 1 to 8 of the characters MCP allows in tool names`},
		{"separator alone", "tool_separator: _\n", `tool_separator joins the names`},
		{"bad prefix", "upstreams:\n  - name: a\n    prefix: \"a b\"\n    url: http://a/mcp\n", `prefix: want up to 64 of the characters MCP allows`},
		{"bad name", "upstreams:\n  - name: a.b\n    url: http://a/mcp\n", `name: want 1 to 64 letters, digits, _ or -`},
		{"no name", "upstreams:\n  - url: http://a/mcp\n", `upstreams[0]: name is required`},
		{"neither", "upstreams:\n  - name: a\n", `give the upstream: url or command`},
		{"both", "upstreams:\n  - name: a\n    url: http://a/mcp\n    command: x\n", `give url or command, not both`},
		{"bad url", "upstreams:\n  - name: a\n    url: ftp://a\n", `want an http or https URL`},
		{"shell in command", "upstreams:\n  - name: a\n    command: x $HOME\n", `looks like a shell expansion`},
		{"env files on a url", "upstreams:\n  - name: a\n    url: http://a/mcp\n    credentials: {env_files: {K: /f}}\n", `env_files are for a command`},
		{"sandbox on a url", "upstreams:\n  - name: a\n    url: http://a/mcp\n    sandbox: on\n", `sandbox contains the children of a command`},
		{"bad sandbox mode", "upstreams:\n  - name: a\n    command: x\n    sandbox: maybe\n", `want on, optional or off, not "maybe"`},
		{"paths without a sandbox", "upstreams:\n  - name: a\n    command: x\n    sandbox: {ro: [/usr]}\n", `ro, rw and network are for mode on or optional`},
		{"exchange without audience", "upstreams:\n  - name: a\n    url: http://a/mcp\n    credentials:\n      token_exchange: {token_url: http://t/token, client_id: c, client_secret_file: /s}\n", `token_exchange: audience is required`},
		{"bad duration", "upstreams:\n  - name: a\n    url: http://a/mcp\n    call_timeout: soon\n", `call_timeout: want a positive duration`},
		{"empty list", "upstreams: []\n", `want at least one upstream`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.body)
			out, stderr, code := cli(t, nil, "config", "check", "--command", "mcp", p)
			if code != exitFail || !strings.Contains(stderr, c.want) {
				t.Errorf("config check: exit %d, want %d and %q:\n%s%s", code, exitFail, c.want, out, stderr)
			}
			_, stderr, code = cli(t, nil, "mcp", "--config", p, "--anonymous", "--listen", "127.0.0.1:0")
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("mcp: exit %d, want %d and %q:\n%s", code, exitUsage, c.want, stderr)
			}
		})
	}
	// upstreams: is mcp's: serve's file has no such key.
	_, stderr, code := cli(t, nil, "config", "check", writeConfig(t, "upstreams:\n  - name: a\n    url: http://a/mcp\n"))
	if code != exitFail || !strings.Contains(stderr, `unknown key "upstreams"`) {
		t.Errorf("upstreams: for serve: exit %d\n%s", code, stderr)
	}
}

// sharedManifest declares two tools for two upstreams, by upstream:.
const sharedManifest = `{"version": "1.0.0", "actions": [
  {"intent": "shell.env", "entity": "shell", "action_type": "read", "description": "Env", "operation_id": "env", "upstream": "shell"},
  {"intent": "echo.say", "entity": "echo", "action_type": "read", "description": "Say", "operation_id": "say", "upstream": "%s"}]}`

// TestUpstreamsStartRefused: what the file alone cannot tell is checked
// at start, before anything is served, each problem naming the upstream
// and the file: a manifest that is missing, an action of --manifest naming
// an upstream the file lacks (or none), an intent two upstreams declare,
// and the flags of the one upstream beside upstreams:.
func TestUpstreamsStartRefused(t *testing.T) {
	dir := t.TempDir()
	self := strconv.Quote(os.Args[0])
	two := func(second string) string {
		return "upstreams:\n  - name: shell\n    command: " + self + "\n    " + second + "\n  - name: echo\n    url: http://127.0.0.1:1/mcp\n"
	}
	cases := []struct {
		name      string
		body      string
		args      []string
		code      int
		want      string
		manifest  string // the --manifest content, when given
		upstreamB string
	}{
		{name: "missing manifest", body: two("manifest: " + filepath.Join(dir, "nope.json")), code: exitFail,
			want: "upstream shell: manifest " + filepath.Join(dir, "nope.json") + ": no such file"},
		{name: "unknown upstream", body: two("args: []"), manifest: "ghost", code: exitFail,
			want: `echo.say (/actions/1) names the upstream "ghost", which the configuration lacks (upstreams: shell, echo)`},
		{name: "no upstream", body: two("args: []"), manifest: "", code: exitFail,
			want: "echo.say (/actions/1) names no upstream: add upstream: NAME, one of shell, echo"},
		{name: "one intent twice", body: "upstreams:\n  - name: a\n    command: " + self + "\n    manifest: " + envManifest +
			"\n  - name: b\n    command: " + self + "\n    manifest: " + envManifest + "\n", code: exitFail,
			want: "the intent shell.env is declared by the upstreams a and b"},
		{name: "no manifest at all", body: two("args: []"), code: exitFail,
			want: "upstreams shell, echo have no manifest"},
		{name: "flags beside upstreams", body: two("manifest: " + envManifest), args: []string{"--upstream-url", "http://127.0.0.1:1/mcp", "--sandbox-network"},
			code: exitUsage, want: "--upstream-url, --sandbox-network configure the one upstream of the flags, but the configuration file lists its upstreams"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"mcp", "--config", writeConfig(t, c.body), "--anonymous", "--listen", "127.0.0.1:0"}
			if c.manifest != "" || c.name == "no upstream" {
				doc := strings.Replace(sharedManifest, "%s", c.manifest, 1)
				if c.manifest == "" {
					doc = strings.Replace(doc, `, "upstream": ""`, "", 1)
				}
				args = append(args, "--manifest", writeTestFile(t, t.TempDir(), "m.json", doc))
			}
			_, stderr, code := cli(t, nil, append(args, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, c.code, c.want, stderr)
			}
		})
	}
}

// TestREADMEUpstreamsConfig: the configuration of the README's "Several
// MCP servers behind one gateway" is valid for axgate mcp as written, and
// config check shows its three upstreams.
func TestREADMEUpstreamsConfig(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- upstreams-config:start -->\n```yaml\n")
	if !ok {
		t.Fatal("README.md has no <!-- upstreams-config:start --> yaml block")
	}
	block, _, _ = strings.Cut(block, "```\n<!-- upstreams-config:end -->")
	p := writeConfig(t, block)
	out, stderr, code := cli(t, nil, "config", "check", "--command", "mcp", p)
	if code != exitOK {
		t.Fatalf("the README's configuration: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"upstream files: command node", "upstream memory: command node", "upstream search: url http://search:9000/mcp (tools search_…)",
		"manifest: the actions of --manifest whose upstream is files", "env MEMORY_FILE_PATH (values not shown)", "sandbox on ro /opt/mcp rw /srv/files"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check does not show %q:\n%s", want, out)
		}
	}
}

// TestUpstreamsReloadKeepsTheEnforcerOfAnUnchangedManifest: a reload keeps
// the enforcer of an upstream whose manifest file did not change (the
// gateway then sees its upstream unchanged, and tells no client its tools
// changed), and builds a new one for a manifest that changed.
func TestUpstreamsReloadKeepsTheEnforcerOfAnUnchangedManifest(t *testing.T) {
	dir := t.TempDir()
	echoM := filepath.Join(dir, "echo.json")
	copyFile(t, echoManifest, echoM)
	cfgPath := writeTestFile(t, dir, "axgate.yaml", "upstreams:\n  - name: shell\n    command: "+strconv.Quote(os.Args[0])+"\n    manifest: "+envManifest+
		"\n  - name: echo\n    url: http://127.0.0.1:1/mcp\n    manifest: "+echoM+"\n")
	fresh := func() *flag.FlagSet {
		fs, _, _ := mcpFlags(&env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
		return fs
	}
	made := 0
	mu := &multiUpstreams{fresh: fresh, childEnv: func(upstreamConfig) []string { return nil },
		enforcer: func(m, _ *manifest.Manifest) (*axgate.Enforcer, error) { made++; return axgate.New(m) }}
	build := func() *generation {
		t.Helper()
		cf, err := readConfigFile(cfgPath, fresh())
		if err != nil {
			t.Fatal(err)
		}
		g, err := mu.build(cf)
		if err != nil {
			t.Fatal(err)
		}
		mu.byDigest = g.byDigest
		return g
	}
	first := build()
	same := build()
	if made != 2 || same.named[0].Enforcer != first.named[0].Enforcer || same.named[1].Enforcer != first.named[1].Enforcer {
		t.Errorf("a reload of unchanged manifests made %d enforcers, want none new", made-2)
	}
	data, _ := os.ReadFile(echoM)
	writeTestFile(t, dir, "echo.json", strings.Replace(string(data), `"maximum": 3`, `"maximum": 1`, 1))
	changed := build()
	if made != 3 || changed.named[0].Enforcer != first.named[0].Enforcer || changed.named[1].Enforcer == first.named[1].Enforcer {
		t.Errorf("echo's manifest changed: %d enforcers made, want 3 (shell's kept, echo's new)", made)
	}
}
