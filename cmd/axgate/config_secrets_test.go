package main

import (
	"fmt"
	"strings"
	"testing"
)

// Attack: config check's output ends up in CI logs; it must print no
// secret a configuration holds: a webhook URL's query (?token=…), a Slack
// URL or a password in a URL the parser refuses, or a bad webhook URL
// quoted in the error.
func TestConfigCheckPrintsNoSecret(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETtok"
	cases := []struct {
		name    string
		config  string
		environ map[string]string
	}{
		{"webhook query token", `
notify:
  webhooks:
    - url: https://hooks.example.com/axgate?token=` + secret + `
      secret-env: AXGATE_WEBHOOK_SECRET
`, nil},
		{"redis password the URL parser refuses", `
upstream: http://tools:9000
`, map[string]string{"AXGATE_REDIS": "redis://:" + secret + "%zz@redis:6379/0"}},
		{"upstream password the URL parser refuses", `
upstream: "http://user:` + secret + `%zz@tools:9000"
`, nil},
		{"webhook URL with a bad scheme", `
notify:
  webhooks:
    - url: ftp://hooks.slack.com/services/T/B/` + secret + `
      format: slack
`, nil},
		{"slack URL the parser refuses", `
notify:
  webhooks:
    - url: "https://hooks.slack.com/services/T/B/` + secret + `%zz"
      format: slack
`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.config)
			out, stderr, code := cli(t, c.environ, "config", "check", p)
			if strings.Contains(out+stderr, secret) {
				t.Errorf("config check (exit %d) printed the secret:\n%s\n%s", code, out, stderr)
			}
		})
	}
}

// Attack: a configuration of a few kilobytes whose aliases expand to
// millions of values ("billion laughs": N webhooks that are each an alias
// of one with M tenants that is itself an alias) is read N×M times;
// config check (and serve, mcp) must refuse it rather than build it.
func TestConfigAliasBombRefused(t *testing.T) {
	t.Parallel()
	const n, m = 1000, 1000
	var b strings.Builder
	b.WriteString("notify:\n  webhooks:\n    - &w {url: \"https://hooks.example.com/x\", format: slack, tenants: &t [")
	for i := range m {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "t%d", i)
	}
	b.WriteString("]}\n")
	for range n {
		b.WriteString("    - *w\n")
	}
	p := writeConfig(t, b.String())
	out, stderr, code := cli(t, nil, "config", "check", p)
	if code != exitFail || !strings.Contains(stderr, "alias") {
		t.Errorf("config check of an alias bomb: exit %d, %d bytes of output; want a refusal that names the aliases\n%.300s", code, len(out), stderr)
	}
}

// Attack: hostile shapes of a configuration file: deep nesting, and a file
// far larger than any configuration (a config path that names a device
// such as /dev/zero would be read forever). Each is refused with a clear
// error, without a crash.
func TestConfigHostileShapesRefused(t *testing.T) {
	t.Parallel()
	deep := "notify: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"
	huge := "upstream: http://tools:9000\n" + strings.Repeat("# padding padding padding padding padding padding\n", 2<<20/50)
	for name, body := range map[string]string{"deep": deep, "huge": huge} {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, body)
			_, stderr, code := cli(t, nil, "config", "check", p)
			if code != exitFail {
				t.Errorf("config check of a %s file: exit %d\n%.300s", name, code, stderr)
			}
		})
	}
}

// Attack: an --upstream (serve) or --upstream-url (mcp) with a password and
// a wrong scheme is quoted in the usage error, which lands in CI and
// container logs.
func TestUpstreamErrorHidesPassword(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETpw"
	m := projectManifest("shop-basic.json")
	for _, args := range [][]string{
		{"serve", "--manifest", m, "--anonymous", "--upstream", "ftp://user:" + secret + "@tools:9000"},
		{"mcp", "--manifest", m, "--anonymous", "--upstream-url", "ftp://user:" + secret + "@tools:9000/mcp"},
	} {
		_, stderr, code := cli(t, nil, args...)
		if code == exitOK || strings.Contains(stderr, secret) {
			t.Errorf("%s: exit %d, stderr holds the password or the call was accepted:\n%.400s", args[0], code, stderr)
		}
	}
}
