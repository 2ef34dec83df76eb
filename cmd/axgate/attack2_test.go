package main

import (
	"strings"
	"testing"
)

// Attack: config check's output ends up in CI logs; it must print no
// secret a configuration holds: a webhook URL's query (?token=…), a Slack
// URL or a password in a URL the parser refuses, or a bad webhook URL
// quoted in the error.
func TestAttack2ConfigCheckPrintsNoSecret(t *testing.T) {
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
