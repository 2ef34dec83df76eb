package main

import "testing"

// TestMistypedInputGetsErrorSuggestionAndPointer: a mistyped flag or
// command gets the error, the flag or command probably meant, and where to
// look, and nothing else (before, the whole usage followed and scrolled the
// error away).
func TestMistypedInputGetsErrorSuggestionAndPointer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string // the whole of stderr
	}{
		{"serve flag", []string{"serve", "--upstrem", "http://127.0.0.1:9000"},
			"axgate serve: unknown flag --upstrem (did you mean --upstream?)\nRun \"axgate serve -h\" for its flags.\n"},
		{"mcp flag with several", []string{"mcp", "--manifest", "m.json", "--upstrem", "x"},
			"axgate mcp: unknown flag --upstrem (did you mean --upstream-command or --upstream-env or --upstream-url?)\nRun \"axgate mcp -h\" for its flags.\n"},
		{"mcp flag", []string{"mcp", "--stdoi"},
			"axgate mcp: unknown flag --stdoi (did you mean --stdio?)\nRun \"axgate mcp -h\" for its flags.\n"},
		{"single dash", []string{"lint", "-levl", "full", "m.json"},
			"axgate lint: unknown flag --levl (did you mean --level?)\nRun \"axgate lint -h\" for its flags.\n"},
		{"no guess", []string{"lint", "--zzzzzz", "m.json"},
			"axgate lint: unknown flag --zzzzzz\nRun \"axgate lint -h\" for its flags.\n"},
		{"missing value", []string{"serve", "--listen"},
			"axgate serve: --listen needs a value\nRun \"axgate serve -h\" for its flags.\n"},
		{"bad value", []string{"serve", "--shutdown-timeout", "soon"},
			"axgate serve: invalid value \"soon\" for flag --shutdown-timeout: parse error\nRun \"axgate serve -h\" for its flags.\n"},
		{"subcommand flag", []string{"manifest", "init", "--upstream-comand", "x"},
			"axgate manifest init: unknown flag --upstream-comand (did you mean --upstream-command?)\nRun \"axgate manifest init -h\" for its flags.\n"},
		{"command", []string{"lnt", "axag.json"},
			"axgate: unknown command \"lnt\" (did you mean \"lint\"?)\nRun \"axgate -h\" for the commands.\n"},
		{"help of a mistyped command", []string{"help", "serv"},
			"axgate: unknown command \"serv\" (did you mean \"serve\"?)\nRun \"axgate -h\" for the commands.\n"},
		{"token kind", []string{"token", "principl", "--key", "k.pem"},
			"axgate token: unknown token kind \"principl\" (did you mean \"principal\"?)\n"},
		{"keys subcommand", []string{"keys", "gem", "--out", "k"},
			"axgate keys: unknown subcommand \"gem\" (did you mean \"gen\"?)\nUsage: axgate keys gen [--alg EdDSA|ES256|RS256] --out DIR\n"},
		{"command without guess", []string{"frobnicate"},
			"axgate: unknown command \"frobnicate\"\nRun \"axgate -h\" for the commands.\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, nil, c.args...)
			if code != exitUsage || stdout != "" || stderr != c.want {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d and only:\n%s", code, stdout, stderr, exitUsage, c.want)
			}
		})
	}
}
