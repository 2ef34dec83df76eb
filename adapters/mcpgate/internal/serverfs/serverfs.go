// Package serverfs installs, for tests, a real third-party MCP server that nobody here wrote.
//
// It is @modelcontextprotocol/server-filesystem from npm, at the version
// package.json pins, with the dependencies package-lock.json pins (npm ci),
// so that what it lists does not change between runs.
//
// The installation is kept under os.UserCacheDir()/axgate/npm, in a folder
// named after the lock file's digest, and reused by later runs; where there
// is no cache folder, it goes to the test's temporary folder. A test that
// needs the server is skipped, saying why, when node or npm is missing or
// npm cannot install (offline).
package serverfs

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Version is the pinned version of @modelcontextprotocol/server-filesystem.
const Version = "2026.8.31"

const pkg = "@modelcontextprotocol/server-filesystem"

//go:embed package.json
var packageJSON []byte

//go:embed package-lock.json
var packageLock []byte

// Command returns the command that starts the server over stdio with the
// given directories as the ones it may touch, for mcp.CommandTransport. It
// skips t when the server cannot be installed.
func Command(t testing.TB, roots ...string) *exec.Cmd {
	t.Helper()
	node, script := Install(t)
	return exec.Command(node, append([]string{script}, roots...)...)
}

// Install installs the pinned server (or finds it installed) and returns
// the node binary and the server's script. It skips t when node or npm is
// missing or the installation fails.
func Install(t testing.TB) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed: the test runs %s@%s, a Node.js MCP server", pkg, Version)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not installed: the test installs %s@%s with it", pkg, Version)
	}
	sum := sha256.Sum256(append(append([]byte{}, packageJSON...), packageLock...))
	name := "server-filesystem-" + Version + "-" + hex.EncodeToString(sum[:6])
	dir := ""
	if cache, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(cache, "axgate", "npm", name)
	}
	if dir == "" || !installed(dir) {
		dir = install(t, npm, dir)
	}
	script, err = bin(dir)
	if err != nil {
		t.Fatalf("%s@%s installed in %s: %v", pkg, Version, dir, err)
	}
	return node, script
}

// installed reports whether dir holds a finished installation: it is put
// in place by a rename only once npm ci has succeeded.
func installed(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
	return err == nil
}

// install runs npm ci in a fresh folder and moves it to dir (the cache),
// or leaves it in the test's temporary folder when dir is "" or cannot be
// written; it returns where the installation is.
func install(t testing.TB, npm, dir string) string {
	t.Helper()
	work := ""
	if dir != "" {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			work, _ = os.MkdirTemp(filepath.Dir(dir), ".install-*")
		}
	}
	if work == "" {
		work, dir = t.TempDir(), ""
	} else {
		defer os.RemoveAll(work) // after a successful rename, nothing is left
	}
	for name, data := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// --ignore-scripts: nothing of the dependencies runs at install time;
	// --prefer-offline: npm's own cache serves what it holds.
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm ci of %s@%s failed (offline?): %v\n%s", pkg, Version, err, out)
	}
	if dir == "" {
		return work
	}
	if err := os.Rename(work, dir); err != nil && !installed(dir) {
		// Not a concurrent run that finished first: use this one where it is.
		t.Logf("keeping the installation out of the cache: %v", err)
		keep := t.TempDir()
		if err := os.Rename(work, filepath.Join(keep, "i")); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(keep, "i")
	}
	return dir
}

// bin returns the script the package's bin entry names.
func bin(dir string) (string, error) {
	root := filepath.Join(dir, "node_modules", pkg)
	data, err := os.ReadFile(filepath.Join(root, "package.json"))
	if err != nil {
		return "", err
	}
	var meta struct {
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", err
	}
	if meta.Version != Version {
		return "", errors.New("installed version " + meta.Version + ", want " + Version)
	}
	var one string
	if json.Unmarshal(meta.Bin, &one) == nil && one != "" {
		return filepath.Join(root, one), nil
	}
	var many map[string]string
	if err := json.Unmarshal(meta.Bin, &many); err != nil || len(many) != 1 {
		return "", errors.New("package.json has no single bin entry")
	}
	for _, s := range many {
		return filepath.Join(root, s), nil
	}
	return "", errors.New("unreachable")
}
