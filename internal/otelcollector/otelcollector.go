// Package otelcollector runs a real OpenTelemetry Collector for end-to-end tests.
//
// It has an OTLP/HTTP receiver on a free local port, a batch processor and
// the debug exporter at detailed verbosity for traces, metrics and logs, whose
// output (span names, attributes, events, metric names, log bodies) the test
// reads from the collector's stderr.
//
// The collector binary is found through the AXGATE_OTELCOL environment
// variable; .ci/otelcol.sh builds one and prints its path:
//
//	export AXGATE_OTELCOL="$(bash .ci/otelcol.sh)"
//
// Without it, or when the binary cannot be run, Start skips the test and says
// how to get one. examples/shop's TestOTLPToCollector uses it.
package otelcollector

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvBinary names the environment variable that holds the collector binary's
// path.
const EnvBinary = "AXGATE_OTELCOL"

// ready is what the collector logs once its pipelines run.
const ready = "Everything is ready"

// Collector is a running collector process.
type Collector struct {
	endpoint string
	cmd      *exec.Cmd
	out      *syncBuffer
	done     chan struct{}
}

// Start starts a collector for the test and stops it when the test ends. It
// skips the test when AXGATE_OTELCOL is unset, names no file or a file that
// cannot be run, and fails it when the collector started but did not come up
// within a minute (its output is then in the failure).
func Start(t testing.TB) *Collector {
	t.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		t.Skipf("no OpenTelemetry Collector: set %s to a collector binary (build one with: export %s=\"$(bash .ci/otelcol.sh)\")", EnvBinary, EnvBinary)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no OpenTelemetry Collector at %s=%s: %v (build one with .ci/otelcol.sh)", EnvBinary, bin, err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("otelcollector: %v", err)
	}
	c := &Collector{endpoint: fmt.Sprintf("127.0.0.1:%d", port), out: &syncBuffer{}, done: make(chan struct{})}
	cfg := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(cfg, []byte(config(c.endpoint)), 0o600); err != nil {
		t.Fatalf("otelcollector: %v", err)
	}
	c.cmd = exec.Command(bin, "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Skipf("the OpenTelemetry Collector at %s=%s cannot be started: %v (rebuild it with .ci/otelcol.sh)", EnvBinary, bin, err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(c.stop)
	if !c.waitFor(time.Minute, ready) {
		t.Fatalf("otelcollector: not ready within a minute; its output:\n%s", c.Output())
	}
	return c
}

// config is a collector configuration with the OTLP/HTTP receiver on
// endpoint, and its own metrics off so that no fixed port is taken.
func config(endpoint string) string {
	return `receivers:
  otlp:
    protocols:
      http:
        endpoint: ` + endpoint + `
processors:
  batch:
    timeout: 100ms
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
    metrics:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
`
}

// Endpoint is the OTLP/HTTP receiver's host:port (plain HTTP).
func (c *Collector) Endpoint() string { return c.endpoint }

// Output is everything the collector printed so far.
func (c *Collector) Output() string { return c.out.String() }

// WaitFor waits until the collector's output contains every one of want, up
// to timeout, and reports whether it did. Exporting is asynchronous, so a test
// waits for what it looks for rather than reading the output once.
func (c *Collector) WaitFor(timeout time.Duration, want ...string) bool {
	return c.waitFor(timeout, want...)
}

func (c *Collector) waitFor(timeout time.Duration, want ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out := c.out.String()
		all := true
		for _, w := range want {
			if !strings.Contains(out, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.done:
			// The process exited: what it printed is all there will be.
			out = c.out.String()
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		case <-tick.C:
		}
	}
}

func (c *Collector) stop() {
	if c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer the process writes to while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
