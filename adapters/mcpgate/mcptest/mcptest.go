// Package mcptest provides, for tests of MCP gateways, a real third-party MCP server that nobody here wrote.
//
// It is @modelcontextprotocol/server-filesystem from npm, a Node.js server,
// at a pinned version (ServerFilesystemVersion) with pinned dependencies
// (npm ci), so that what it lists does not change between runs. The
// installation is cached under os.UserCacheDir()/axgate/npm and reused. A
// test that needs the server is skipped, saying why, when node or npm is
// missing or npm cannot install it (offline).
//
// The axgate command's end-to-end tests (axgate mcp, axgate manifest init)
// use it; so may the tests of a program that embeds the gateway.
package mcptest

import (
	"os/exec"
	"testing"

	"github.com/axgate/axgate/adapters/mcpgate/internal/serverfs"
)

// ServerFilesystemVersion is the pinned version of
// @modelcontextprotocol/server-filesystem.
const ServerFilesystemVersion = serverfs.Version

// ServerFilesystem returns the command that starts the pinned
// server-filesystem over stdio, allowed to touch the given directories, for
// mcp.CommandTransport or a gateway's upstream. It skips t when the server
// cannot be installed.
func ServerFilesystem(t testing.TB, roots ...string) *exec.Cmd {
	t.Helper()
	return serverfs.Command(t, roots...)
}

// InstallServerFilesystem installs the pinned server-filesystem (or finds
// it installed) and returns the node binary and the server's script: the
// server is "node script DIR…". It skips t when the server cannot be
// installed.
func InstallServerFilesystem(t testing.TB) (node, script string) {
	t.Helper()
	return serverfs.Install(t)
}
