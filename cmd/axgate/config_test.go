package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "axgate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: defaults < AXGATE_* variables < the file < flags
// given on the command line, for every kind of flag.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `
listen: 0.0.0.0:9999          # overridden by --listen
upstream: http://from-file:9000
upstream-timeout: 7s
anonymous: true
precondition:
  - "a=args.x > 0"
  - "b=args.y > 0"
tls:
  cert: /etc/axgate/tls.crt
  key: /etc/axgate/tls.key
audit-max-size: 5
`)
	environ := map[string]string{
		"AXGATE_CONFIG":           file,
		"AXGATE_UPSTREAM":         "http://from-env:9000", // the file wins
		"AXGATE_MANIFEST":         "/env/manifest.json",   // only here
		"AXGATE_AUDIT":            "off",                  // only here
		"AXGATE_SHUTDOWN_TIMEOUT": "3s",
		"AXGATE_AUDIT_MAX_SIZE":   "50", // the file wins
	}
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(k string) string { return environ[k] }}
	fs, c, ops := serveFlags(e)
	if _, err := parseFlags(e, fs, []string{"--listen", "127.0.0.1:1234", "--audit-max-backups", "2"}); err != nil {
		t.Fatal(err)
	}
	got, err := applyConfig(e, fs)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name, got, want, source string
	}{
		{"listen", c.listen, "127.0.0.1:1234", sourceFlag},
		{"upstream", c.upstream, "http://from-file:9000", sourceFile},
		{"manifest", c.manifest, "/env/manifest.json", sourceEnv},
		{"audit", ops.audit, "off", sourceEnv},
		{"upstream-timeout", c.upstreamTimeout.String(), (7 * time.Second).String(), sourceFile},
		{"shutdown-timeout", c.shutdownTimeout.String(), (3 * time.Second).String(), sourceEnv},
		{"anonymous", boolString(c.anonymous), "true", sourceFile},
		{"precondition", c.preconditions.String(), "a=args.x > 0; b=args.y > 0", sourceFile},
		{"tls-cert", ops.tlsCert, "/etc/axgate/tls.crt", sourceFile},
		{"tls-key", ops.tlsKey, "/etc/axgate/tls.key", sourceFile},
		{"audit-max-size", strconv.Itoa(ops.auditMaxSize), "5", sourceFile},
		{"audit-max-backups", strconv.Itoa(ops.auditMaxBackups), "2", sourceFlag},
		{"issuer", c.issuer, "axgate", sourceDefault},
	}
	for _, ck := range checks {
		if ck.got != ck.want || got.sources[ck.name] != ck.source {
			t.Errorf("%s = %q from %s, want %q from %s", ck.name, ck.got, got.sources[ck.name], ck.want, ck.source)
		}
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestConfigStrict: an unknown key, a value the flag refuses, a list for a
// single flag, a key given twice: each is an error at its line, with a hint
// for a misspelt key, and serve does not start.
func TestConfigStrict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       []string
	}{
		{"misspelt key", "upstreem: http://x\n", []string{`:1:1: unknown key "upstreem" (did you mean "upstream"?)`}},
		{"misspelt section key", "tls:\n  cert: a\n  client-cs: b\n", []string{`:3:3: tls: unknown key "client-cs" (did you mean "client-ca"?)`}},
		{"bad duration", "upstream-timeout: soon\n", []string{`:1:19: upstream-timeout: parse error`}},
		{"bad bool", "anonymous: maybe\n", []string{`:1:12: anonymous: parse error`}},
		{"bad int", "audit-max-size: big\n", []string{`:1:17: audit-max-size: parse error`}},
		{"list for a single flag", "listen: [a, b]\n", []string{`listen: want a single value, not a list`}},
		{"bad condition", "precondition: [nocel]\n", []string{`precondition: want NAME=CEL`}},
		{"twice", "tls-cert: a\ntls:\n  cert: b\n", []string{`tls-cert: given twice`}},
		{"config in config", "config: other.yaml\n", []string{`unknown key "config"`}},
		{"two documents", "listen: a\n---\nlisten: b\n", []string{`one YAML document`}},
		{"not a mapping", "- a\n", []string{`want a mapping`}},
		{"bad mode", "enforce:\n  order.place: shadw\n", []string{`enforce.order.place: unknown mode "shadw" (did you mean "shadow"?)`}},
		{"webhook without key", "notify:\n  webhooks:\n    - url: https://h.example/x\n", []string{`a signed webhook needs its key`}},
		{"webhook bad url", "notify:\n  webhooks:\n    - url: ftp://h\n      format: slack\n", []string{`want an http or https URL`}},
		{"two problems", "listn: a\nissuer: [x]\n", []string{`:1:1: unknown key "listn"`, `:2:9: issuer: want a single value`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.body)
			out, stderr, code := cli(t, nil, "config", "check", p)
			if code != exitFail {
				t.Errorf("config check: exit %d, want %d\n%s%s", code, exitFail, out, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("config check does not say %q:\n%s", w, stderr)
				}
			}
			// The same, with every flag also given on the command line: the
			// file's values are checked all the same.
			_, stderr, code = cli(t, nil, "serve", "--config", p, "--manifest", "m.json", "--upstream", "http://127.0.0.1:1", "--anonymous",
				"--upstream-timeout", "1s", "--audit-max-size", "1", "--listen", "127.0.0.1:0", "--issuer", "x")
			if code != exitUsage || !strings.Contains(stderr, c.want[0]) {
				t.Errorf("serve with a bad configuration: exit %d, want %d:\n%s", code, exitUsage, stderr)
			}
		})
	}
}

// TestConfigEnvInvalid: a bad AXGATE_* value is reported with its name.
func TestConfigEnvInvalid(t *testing.T) {
	t.Parallel()
	_, stderr, code := cli(t, map[string]string{"AXGATE_UPSTREAM_TIMEOUT": "forever"},
		"serve", "--manifest", "m.json", "--upstream", "http://127.0.0.1:1", "--anonymous")
	if code != exitUsage || !strings.Contains(stderr, "AXGATE_UPSTREAM_TIMEOUT") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// TestConfigCheck: a valid file is described flag by flag with its
// source, and the sections are read.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, `
manifest: shop.json
upstream: http://tools:9000
enforce:
  order.place: shadow
  "*": enforce
notify:
  webhooks:
    - url: https://hooks.example.com/axgate
      secret-env: AXGATE_WEBHOOK_SECRET
      tenants: [acme]
    - url: https://hooks.slack.com/services/T/B/X
      format: slack
      intents: [order.place]
`)
	out, stderr, code := cli(t, map[string]string{"AXGATE_ISSUER": "https://idp.example", "AXGATE_REDIS": "redis://:s3cret@redis:6379/0"}, "config", "check", p)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"valid configuration for axgate serve",
		"upstream", "http://tools:9000", "(file)",
		"https://idp.example", "(env AXGATE_ISSUER)",
		"127.0.0.1:8080", "(default)",
		"enforce order.place", "shadow",
		"notify  axgate", "https://hooks.example.com/axgate",
		"notify  slack", "https://hooks.slack.com/… for intents order.place",
		"(key from env AXGATE_WEBHOOK_SECRET) for tenants acme",
		"redis://:xxxxx@redis:6379/0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "/services/T/B/X") {
		t.Errorf("config check printed a password:\n%s", out)
	}
	fs, _, _ := serveFlags(&env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }})
	cf, err := readConfigFile(p, fs)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Enforce.Intents["order.place"] != modeShadow || cf.Enforce.Intents["*"] != modeEnforce {
		t.Errorf("enforce: %v", cf.Enforce.Intents)
	}
	if len(cf.Notify.Webhooks) != 2 || cf.Notify.Webhooks[0].SecretEnv != "AXGATE_WEBHOOK_SECRET" ||
		cf.Notify.Webhooks[0].Tenants[0] != "acme" || cf.Notify.Webhooks[1].Format != "slack" {
		t.Errorf("notify: %+v", cf.Notify)
	}

	// serve applies these sections: the webhook's key must be set.
	_, stderr, code = cli(t, nil, "serve", "--config", p, "--anonymous", "--manifest", projectManifest("shop-full.json"))
	if code != exitFail || !strings.Contains(stderr, "secret-env AXGATE_WEBHOOK_SECRET is not set") {
		t.Errorf("serve with a webhook whose key is unset: exit %d\n%s", code, stderr)
	}

	if _, stderr, code := cli(t, nil, "config", "check", p, "--command", "lint"); code != exitUsage || !strings.Contains(stderr, "want one of: mcp, serve") {
		t.Errorf("--command lint: exit %d\n%s", code, stderr)
	}
}

// TestConfigTableInOperatingDoc: docs/operating.md's table of configuration keys lists
// every flag of each command that takes --config (serve, mcp) that a file
// may set, with the commands it applies to, its environment variable and
// its default for those commands, and nothing else.
func TestConfigTableInOperatingDoc(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "<!-- config-keys:start -->")
	if !ok {
		t.Fatal("docs/operating.md has no <!-- config-keys:start --> table")
	}
	section, _, _ = strings.Cut(section, "<!-- config-keys:end -->")
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| ([a-z, ]+) \\| `([A-Z_]+)` \\| (.*?) \\| .+ \\|$")
	// documented maps "command key" to the row's variable and default.
	documented := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, cmd := range strings.Split(m[2], ", ") {
			k := cmd + " " + m[1]
			if _, dup := documented[k]; dup {
				t.Errorf("docs/operating.md config table: %q twice for %s", m[1], cmd)
			}
			documented[k] = [2]string{m[3], m[4]}
		}
	}
	if len(documented) == 0 {
		t.Fatal("docs/operating.md config table: no row read")
	}
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
	for cmd, mk := range configCommands(e) {
		mk().VisitAll(func(f *flag.Flag) {
			d, ok := documented[cmd+" "+f.Name]
			if !ok {
				t.Errorf("docs/operating.md config table lacks %q for %s", f.Name, cmd)
				return
			}
			delete(documented, cmd+" "+f.Name)
			if d[0] != envName(f.Name) {
				t.Errorf("docs/operating.md: %s's variable is %s, want %s", f.Name, d[0], envName(f.Name))
			}
			want := "(none)"
			if f.DefValue != "" && f.DefValue != "[]" {
				want = "`" + f.DefValue + "`"
			}
			if d[1] != want {
				t.Errorf("docs/operating.md: %s's default for %s is %s, want %s", f.Name, cmd, d[1], want)
			}
		})
	}
	for k := range documented {
		t.Errorf("docs/operating.md config table lists %q, which is no flag of that command", k)
	}
}

// TestConfigExampleInOperatingDoc: docs/operating.md's example configuration is valid.
func TestConfigExampleInOperatingDoc(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- config-example:start -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/operating.md has no example configuration")
	}
	block, _, _ = strings.Cut(block, "```")
	out, stderr, code := cli(t, nil, "config", "check", writeConfig(t, block))
	if code != exitOK || !strings.Contains(out, "file:/var/log/axgate/audit.jsonl") {
		t.Errorf("docs/operating.md's configuration: exit %d\n%s%s", code, out, stderr)
	}
}
