package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/middleware"
)

// auditLines reads a file of JSON lines.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: not a JSON line: %q", path, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// TestServeAuditFile: --audit file:PATH writes one JSON line per decision,
// with the parameters' names and never their values; the log on stderr has
// none.
func TestServeAuditFile(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`,
		"--audit", "file:"+path)
	if status, _ := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-SECRET-1","quantity":50}`); status != 400 {
		t.Fatalf("refused call: %d", status)
	}
	if status, _ := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-SECRET-2","quantity":2}`); status != 200 {
		t.Fatalf("allowed call: %d", status)
	}
	if code := rs.stop(); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	lines := auditLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2: %v", len(lines), lines)
	}
	if l := lines[0]; l["msg"] != middleware.AuditMessage || l["decision"] != "deny" || l["code"] != "AXAG_OUT_OF_RANGE" ||
		l["principal"] != "alice" || l["tenant"] != "acme" || l["intent"] != "cart.add_item" {
		t.Errorf("the refusal's record: %v", l)
	}
	if l := lines[1]; l["decision"] != "allow" || toJSON(l["params"]) != `["product_id","quantity"]` {
		t.Errorf("the allowed call's record: %v", l)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte("p-SECRET")) {
		t.Errorf("an argument value is in the audit file:\n%s", data)
	}
	if strings.Contains(rs.log.all(), middleware.AuditMessage) {
		t.Errorf("audit records on stderr with --audit file:\n%s", rs.log.all())
	}
}

// TestServeAuditStdoutAndOff: stdout gets the JSON lines; off writes none.
func TestServeAuditStdoutAndOff(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	for _, sink := range []string{"stdout", "off"} {
		t.Run(sink, func(t *testing.T) {
			var out bytes.Buffer
			var errb bytes.Buffer
			e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
			ops := &opsFlags{audit: sink, flushTimeout: time.Second}
			a, err := openAudit(context.Background(), e, ops, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if sink == "off" {
				// No logger: the enforcer then has no audit sink at all.
				if a.logger != nil || middleware.SlogAudit(a.logger) != nil {
					t.Errorf("--audit off wrote: %q %q", out.String(), errb.String())
				}
				return
			}
			middleware.SlogAudit(a.logger).Audit(context.Background(), middleware.AuditRecord{Time: time.Now(), Intent: "cart.add_item", Decision: "allow"})
			var m map[string]any
			if err := json.Unmarshal(out.Bytes(), &m); err != nil || m["intent"] != "cart.add_item" || errb.Len() != 0 {
				t.Errorf("--audit stdout: stdout %q (%v), stderr %q", out.String(), err, errb.String())
			}
		})
	}
}

// TestAuditFileRotates: with --audit-max-size 1 the file is rotated when
// it reaches a megabyte, and --audit-max-backups bounds the old files.
func TestAuditFileRotates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	ops := &opsFlags{audit: "file:" + path, auditMaxSize: 1, auditMaxBackups: 2, flushTimeout: time.Second}
	a, err := openAudit(context.Background(), e, ops, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sink := middleware.SlogAudit(a.logger)
	rec := middleware.AuditRecord{Time: time.Now(), Intent: "cart.add_item", Tool: "cart_add_item", PrincipalID: "alice",
		Tenant: "acme", Decision: "allow", Params: []string{"product_id", "quantity"}}
	// About 4 MB of records: the file is rotated three times or more.
	var written int
	for written < 4<<20 {
		sink.Audit(context.Background(), rec)
		written += 250 // a record is longer than this
	}
	if err := a.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Errorf("rotated files: %v, want 2 (--audit-max-backups)", files)
	}
	for _, f := range append(files, path) {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s holds %d bytes, more than --audit-max-size 1 MB", f, st.Size())
		}
		for _, l := range auditLines(t, f) {
			if l["intent"] != "cart.add_item" {
				t.Fatalf("%s: a torn or foreign line: %v", f, l)
			}
		}
	}
}

// TestAuditFileUnwritable: a path that cannot be written stops the start.
func TestAuditFileUnwritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	ops := &opsFlags{audit: "file:" + filepath.Join(blocker, "audit.jsonl"), auditMaxSize: 1}
	if _, err := openAudit(context.Background(), e, ops, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--audit") {
		t.Errorf("an audit path under a file: %v, want an error", err)
	}
}

// failingWriter fails while broken is set.
type failingWriter struct{ broken bool }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.broken {
		return 0, errors.New("no space left on device")
	}
	return len(p), nil
}

// TestAuditWriteFailureLoggedOnce: a failing audit file is logged when it
// starts failing and when it works again, not once per record.
func TestAuditWriteFailureLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	fw := &failingWriter{broken: true}
	w := &reportingWriter{w: fw, log: slog.New(slog.NewTextHandler(&logs, nil)), what: "audit.jsonl"}
	for range 3 {
		w.Write([]byte("x\n"))
	}
	fw.broken = false
	for range 3 {
		w.Write([]byte("x\n"))
	}
	out := logs.String()
	if strings.Count(out, "writing the audit log failed") != 1 || strings.Count(out, "writing the audit log works again") != 1 || !strings.Contains(out, "no space left") {
		t.Errorf("log:\n%s", out)
	}
}
