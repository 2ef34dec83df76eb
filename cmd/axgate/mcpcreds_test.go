package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamCredsFlags: the credentials flags of axgate mcp build the
// gateway's UpstreamCredentials, read the client secret from its file,
// and refuse what is incomplete without printing a secret.
func TestUpstreamCredsFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (*upstreamCreds, error) {
		fs, c, _ := mcpFlags(&env{})
		return &c.upstreamCreds, fs.Parse(args)
	}
	u, err := parse("--upstream-header-file", "X-Api-Key="+secret, "--upstream-header-file", "X-Other="+secret,
		"--upstream-token-exchange", "https://id.example.com/oauth/token", "--upstream-token-exchange-audience", "https://notes.example.com/mcp",
		"--upstream-client-credentials", "https://id.example.com/oauth/token",
		"--upstream-client-id", "axgate", "--upstream-client-secret-file", secret, "--upstream-token-exchange-scopes", "a b")
	if err != nil {
		t.Fatal(err)
	}
	c, err := u.build()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.HeaderFiles) != 2 || c.HeaderFiles["X-Api-Key"] != secret {
		t.Errorf("HeaderFiles = %v", c.HeaderFiles)
	}
	te := c.TokenExchange
	if te == nil || te.ClientSecret != "s3cret-value" || te.Audience != "https://notes.example.com/mcp" || strings.Join(te.Scopes, ",") != "a,b" {
		t.Errorf("TokenExchange = %+v", te)
	}
	if cc := c.ClientCredentials; cc == nil || cc.ClientID != "axgate" || cc.ClientSecret != "s3cret-value" {
		t.Errorf("ClientCredentials = %+v", cc)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream-token-exchange", "https://id/t", "--upstream-token-exchange-audience", "a"}, "need --upstream-client-id"},
		{[]string{"--upstream-token-exchange", "https://id/t", "--upstream-client-id", "x", "--upstream-client-secret-file", secret}, "needs --upstream-token-exchange-audience"},
		{[]string{"--upstream-client-credentials", "ftp://id/t", "--upstream-client-id", "x", "--upstream-client-secret-file", secret}, "http or https"},
		{[]string{"--upstream-client-credentials", "https://id/t", "--upstream-client-id", "x", "--upstream-client-secret-file", secret + ".missing"}, "cannot be read"},
		{[]string{"--upstream-client-id", "x"}, "go with --upstream-client-credentials"},
	} {
		u, err := parse(tc.args...)
		if err == nil {
			_, err = u.build()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	if _, err := parse("--upstream-header-file", "NOPATH"); err == nil || !strings.Contains(err.Error(), "NAME=PATH") {
		t.Errorf("--upstream-header-file NOPATH: %v", err)
	}
}

// TestMCPUpstreamEnvFile: --upstream-env-file gives the child the
// variable read from the file, and the value is not in the log.
func TestMCPUpstreamEnvFile(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secretFile, []byte("tok-from-file-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startMCP(t, childEnviron(), "--manifest", filepath.Join("testdata", "mcp", "env.axag.json"), "--anonymous",
		"--upstream-command", strconv.Quote(os.Args[0]), "--upstream-env", testAs+"=env-upstream",
		"--upstream-env-file", "NOTES_TOKEN="+secretFile)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: gw.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "env", map[string]any{})
	if res.IsError {
		t.Fatalf("env: %s", resultText(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), "NOTES_TOKEN=tok-from-file-42") {
		t.Errorf("the child's environment lacks NOTES_TOKEN from the file: %s", raw)
	}
	if code := gw.stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, gw.log.all())
	}
	if strings.Contains(gw.log.all(), "tok-from-file") {
		t.Error("the log holds the value")
	}
}
