package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMCPNodeClient drives axgate mcp in front of server-filesystem with
// the official TypeScript SDK client (examples/mcpgateway/client.test.mjs,
// installed there with npm ci): over streamable HTTP as three callers with
// JWTs, an approver deciding on --human, and over stdio, the test binary as
// axgate mcp --stdio.
func TestMCPNodeClient(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the TypeScript client test installs the TypeScript SDK with npm: not in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript client test needs it")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the TypeScript client test needs it")
	}
	example := filepath.Join("..", "..", "examples", "mcpgateway")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "client.test.mjs"} {
		copyFile(t, filepath.Join(example, f), filepath.Join(dir, f))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm ci of examples/mcpgateway failed (offline?): %v\n%s", err, out)
	}
	program := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	manifestPath, err := filepath.Abs(gatewayManifest)
	if err != nil {
		t.Fatal(err)
	}
	upstream := strconv.Quote(node) + " " + strconv.Quote(program) + " " + strconv.Quote(root)

	pki := newServePKI(t)
	gw := startMCP(t, childEnviron(), "--manifest", manifestPath, "--upstream-command", upstream,
		"--jwks", pki.jwks, "--human", "127.0.0.1:0", "--human-audience", "axgate-people", "--trust-client-elicitation")
	tokens := map[string]string{}
	for name, roles := range map[string]string{"carol-token": "", "alice-token": "editor", "bob-token": "editor,admin"} {
		args := []string{"principal", "--key", pki.key, "--sub", strings.TrimSuffix(name, "-token"), "--aud", gw.url}
		if roles != "" {
			args = append(args, "--roles", roles)
		}
		tokens[name] = mint(t, args...)
	}
	bearers, _ := json.Marshal(tokens)
	// At --human, bob approves with a token of the people's audience.
	people, _ := json.Marshal(map[string]string{"bob-token": mint(t, "principal", "--key", pki.key, "--sub", "bob", "--roles", "editor,admin", "--aud", "axgate-people")})

	// The stdio gateway the script starts: this test binary as axgate.
	stdio := filepath.Join(dir, "axgate-stdio.sh")
	script := "#!/bin/sh\nexec " + strconv.Quote(os.Args[0]) + " mcp --stdio --manifest " + strconv.Quote(manifestPath) +
		" --upstream-command " + strconv.Quote(upstream) + " --local-user alice --local-roles editor --trust-client-elicitation\n"
	if err := os.WriteFile(stdio, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, "--test", "client.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+gw.url, "HUMAN_URL="+gw.human, "ROOT="+root,
		"GATEWAY_COMMAND="+stdio, "BEARER_TOKENS="+string(bearers), "HUMAN_TOKENS="+string(people), testAs+"=axgate")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test client.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v", err)
	}
}
