package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runningServe is "axgate serve" run in process by startServe.
type runningServe struct {
	log   *lineWatcher
	hup   chan os.Signal
	base  string // the gateway's URL
	admin string // the admin server's URL, "" without --admin
	stop  func() int
}

// startServe runs "axgate serve args…" in process, with the environment
// environ and a SIGHUP the test sends through hup, and waits until it
// listens. The test's end stops it.
func startServe(t *testing.T, environ map[string]string, args ...string) *runningServe {
	t.Helper()
	pr, pw := io.Pipe()
	rs := &runningServe{log: newLineWatcher(pr), hup: make(chan os.Signal, 1)}
	e := &env{stdout: pw, stderr: pw, getenv: func(k string) string { return environ[k] },
		signals: func(...os.Signal) (<-chan os.Signal, func()) { return rs.hup, func() {} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, append([]string{"serve"}, args...)) }()
	stopped := false
	code := 0
	rs.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
			pw.Close()
		}
		return code
	}
	t.Cleanup(func() { rs.stop() })
	addr := regexp.MustCompile(`addr=(https?://\S+)`)
	for _, admin := range []bool{true, false} {
		if admin && !strings.Contains(strings.Join(args, " "), "--admin") {
			continue
		}
		want := "serve: listening"
		if admin {
			want = "admin server listening"
		}
		line := rs.waitForOrExit(t, want, done)
		m := addr.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no address in %q", line)
		}
		if admin {
			rs.admin = m[1]
		} else {
			rs.base = m[1]
		}
	}
	return rs
}

// waitForOrExit waits for a log line, failing early when serve exits.
func (rs *runningServe) waitForOrExit(t *testing.T, s string, done chan int) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		for {
			rs.log.mu.Lock()
			for i, l := range rs.log.lines {
				if strings.Contains(l, s) {
					rs.log.lines[i] = "(seen) " + l
					rs.log.mu.Unlock()
					got <- l
					return
				}
			}
			rs.log.mu.Unlock()
			select {
			case <-rs.log.more:
			case <-time.After(60 * time.Second):
				got <- ""
				return
			}
		}
	}()
	select {
	case l := <-got:
		if l == "" {
			t.Fatalf("no log line with %q:\n%s", s, rs.log.all())
		}
		return l
	case code := <-done:
		done <- code
		time.Sleep(100 * time.Millisecond) // let the last lines reach the watcher
		t.Fatalf("axgate serve exited with %d:\n%s", code, rs.log.all())
	}
	return ""
}

// testPKI is a CA and certificates it signed, written as PEM files.
type testPKI struct {
	dir     string
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	caFile  string
	rootCAs *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "axgate test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key, rootCAs: x509.NewCertPool()}
	p.rootCAs.AddCert(ca)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	writePEM(t, p.caFile, "CERTIFICATE", der)
	return p
}

// issue signs a certificate: for 127.0.0.1 when server, for a client
// otherwise. It returns the certificate and key files.
func (p *testPKI) issue(t *testing.T, name string, serial int64, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsClient returns a client that trusts the test CA, presents cert when
// given, and speaks HTTP/2 when the server offers it. Each request opens a
// new connection, so that a reloaded certificate is seen.
func (p *testPKI) tlsClient(t *testing.T, certFile, keyFile string) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.rootCAs}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true,
	}}
}

// TestServeTLS: serve over TLS with a certificate made here, HTTP/2
// negotiated, client certificates required with --tls-client-ca, and the
// certificate reloaded on SIGHUP (a broken one keeps the one in use).
func TestServeTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	certFile, keyFile := pki.issue(t, "server", 10, true)
	clientCert, clientKey := pki.issue(t, "client", 20, false)
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	mpath := filepath.Join(t.TempDir(), "manifest.json")
	copyFile(t, filepath.Join("testdata", "serve", "shop.json"), mpath)

	rs := startServe(t, nil, "--manifest", mpath, "--upstream", up.URL, "--listen", "127.0.0.1:0", "--anonymous",
		"--precondition", `cart is not empty=args.cart_id != ""`, "--audit", "off", "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", pki.caFile)
	if !strings.HasPrefix(rs.base, "https://") {
		t.Fatalf("the log gives %s, want an https URL", rs.base)
	}
	client := pki.tlsClient(t, clientCert, clientKey)
	serial := func() int64 {
		t.Helper()
		resp, err := client.Get(rs.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("healthz over TLS: %d %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 10 {
		t.Fatalf("served certificate serial %d, want 10", got)
	}

	// No client certificate, or plain HTTP: refused.
	if resp, err := pki.tlsClient(t, "", "").Get(rs.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d, want a failed handshake", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(rs.base, "https://") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP was served")
		}
	}

	// A renewed certificate is served after SIGHUP.
	newCert, newKey := pki.issue(t, "server2", 11, true)
	copyFile(t, newCert, certFile)
	copyFile(t, newKey, keyFile)
	rs.hup <- nil
	rs.log.waitFor(t, "TLS certificate reloaded")
	if got := serial(); got != 11 {
		t.Fatalf("after SIGHUP the serial is %d, want 11", got)
	}

	// A broken one keeps the one in use.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs.hup <- nil
	rs.log.waitFor(t, "TLS reload failed")
	if got := serial(); got != 11 {
		t.Fatalf("after a failed reload the serial is %d, want 11", got)
	}
	if code := rs.stop(); code != exitOK {
		t.Errorf("serve exited with %d", code)
	}
}

// TestServeTLSUsage: TLS flags that cannot work stop the start.
func TestServeTLSUsage(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	certFile, keyFile := pki.issue(t, "server", 10, true)
	base := []string{"serve", "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", "http://127.0.0.1:1", "--anonymous", "--listen", "127.0.0.1:0"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certFile}, "give --tls-cert and --tls-key together"},
		{[]string{"--tls-cert", certFile, "--tls-key", certFile}, "TLS certificate"},
		{[]string{"--tls-client-ca", pki.caFile}, "--tls-client-ca needs --tls-cert"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", keyFile}, "no PEM certificate"},
		{[]string{"--pprof"}, "give --admin too"},
		{[]string{"--audit", "syslog"}, "--audit must be stdout, stderr, file:PATH, otlp or off"},
		{[]string{"--audit", "file:" + filepath.Join(t.TempDir(), "a.jsonl"), "--audit-max-size", "0"}, "--audit-max-size must be at least 1"},
	} {
		_, stderr, code := cli(t, nil, append(base, c.args...)...)
		if code != exitFail || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, exitFail, c.want, stderr)
		}
	}
}
