package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
)

// TestHTTPQuickStartRuns serves the README's HTTP program on the README's
// axag.json and runs the README's curl commands against it as written
// (with sh, the test's addresses in place of 127.0.0.1:8080 and :8081):
// each answers what its comment says.
func TestHTTPQuickStartRuns(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, script, ok := strings.Cut(string(readme), "<!-- http-quickstart:start -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no <!-- http-quickstart:start --> sh block")
	}
	script, _, _ = strings.Cut(script, "```")
	for _, tool := range []string{"sh", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the README's commands need it", tool)
		}
	}

	m, err := manifest.LoadFile(filepath.Join("..", "..", "..", "testdata", "readme", "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	agents, people, err := handlers(enf)
	if err != nil {
		t.Fatal(err)
	}
	a, p := httptest.NewServer(agents), httptest.NewServer(people)
	defer a.Close()
	defer p.Close()
	script = strings.NewReplacer("127.0.0.1:8080", strings.TrimPrefix(a.URL, "http://"),
		"127.0.0.1:8081", strings.TrimPrefix(p.URL, "http://")).Replace(script)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []struct{ status, has string }{
		{"400", `"code":"AXAG_INVALID_FORMAT"`},
		{"428", `"code":"AXAG_CONFIRMATION_MISSING"`},
		{"200", `"order_id":"o-1"`},
		{"428", `"reason":"already_used"`},
	}
	if len(lines) != 2*len(want) { // each answer's body, then its status
		t.Fatalf("the README's commands printed %d lines, want %d:\n%s", len(lines), 2*len(want), stdout.String())
	}
	for i, w := range want {
		if body, status := lines[2*i], lines[2*i+1]; status != w.status || !strings.Contains(body, w.has) {
			t.Errorf("answer %d: %s %s\nwant status %s with %s", i+1, body, status, w.status, w.has)
		}
	}
}
