package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
)

// benchManifest is bench/peers-gateway's read: one read action with a
// pattern-checked path and a required role, no result checks.
const benchManifest = `{"version":"1.0.0","conformance":"basic","entities":[{"name":"doc","actions":[
 {"intent":"doc.read","action_type":"read","operation_id":"read","description":"Read one document by its path.",
  "parameters":{"path":{"type":"string","description":"The document's path, under docs/","required":true,"maxLength":200,"pattern":"^docs/"}},
  "risk_level":"none","idempotent":true,"scope":"global","required_roles":["reader"]}]}]}`

// benchReadResult is what bench/peers-gateway's HTTP upstream answers to
// the read.
const benchReadResult = `{"result":{"path":"docs/intro.md","size":142,"text":"axgate enforces AXAG manifests on the tool calls of AI agents: intent, roles, parameters, constraints, rate limits, confirmations."}}`

// benchCLI runs the command in-process for a benchmark's setup.
func benchCLI(b *testing.B, args ...string) string {
	b.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}, args); code != exitOK {
		b.Fatalf("%v: exit %d: %s", args, code, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// benchSink is a ResponseWriter that keeps the status and the body's
// length, reusing its header map: the benchmark measures the gateway.
type benchSink struct {
	h      http.Header
	status int
	n      int
}

func (s *benchSink) Header() http.Header         { return s.h }
func (s *benchSink) WriteHeader(code int)        { s.status = code }
func (s *benchSink) Write(p []byte) (int, error) { s.n += len(p); return len(p), nil }

// BenchmarkServeRead is one allowed read through serve's whole handler, as
// bench/peers-gateway times it: bearer verification, the chain, the audit
// record (a JSON line, to io.Discard here), the forwarded call to a real
// HTTP upstream on loopback and the answer written.
func BenchmarkServeRead(b *testing.B) {
	dir := b.TempDir()
	benchCLI(b, "keys", "gen", "--out", dir)
	key, jwks := filepath.Join(dir, privateKeyFile), filepath.Join(dir, publicJWKSFile)
	bearer := benchCLI(b, "token", "principal", "--key", key, "--sub", "agent", "--tenant", "t0", "--roles", "reader")
	mpath := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mpath, []byte(benchManifest), 0o600); err != nil {
		b.Fatal(err)
	}
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchReadResult)
	}))
	defer upSrv.Close()
	u, _ := url.Parse(upSrv.URL)
	audit := jsonAudit(io.Discard)
	gw, err := newGateway(context.Background(), serveConfig{
		manifest:        mpath,
		enforcerConfig:  enforcerConfig{jwks: jwks, issuer: "axgate", audience: "axgate"},
		upstreamTimeout: 30 * time.Second,
		enforcerOptions: func(*manifest.Manifest) ([]axgate.Option, error) {
			return []axgate.Option{axgate.WithLogger(audit)}, nil
		},
	}, u, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer gw.close()
	body := []byte(`{"path":"docs/intro.md"}`)
	w := &benchSink{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.status, w.n = 0, 0
		r := httptest.NewRequest(http.MethodPost, "/tools/read/call", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+bearer)
		gw.ServeHTTP(w, r)
		if w.status != http.StatusOK || w.n == 0 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}
