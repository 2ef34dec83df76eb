//go:build unix

package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started by a test, on a free loopback port,
// without persistence, so that the test can pause, stop and restart it.
type Server struct {
	tb   testing.TB
	bin  string
	port int
	args []string
	cmd  *exec.Cmd
}

// StartServer starts a private redis-server, or skips the test when the
// binary is not installed. It is stopped when the test ends. args are more
// redis-server options ("--appendonly", "yes"), which override the
// defaults.
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not installed: skipping the test that needs a Redis of its own")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{tb: tb, bin: bin, port: port, args: args}
	tb.Cleanup(func() { s.Stop() })
	s.Start()
	return s
}

// URL is the server's URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Start starts the server (again, after Stop) on its port and waits until it
// answers.
func (s *Server) Start() {
	s.tb.Helper()
	if s.cmd != nil {
		s.tb.Fatal("redistest: server already running")
	}
	s.cmd = exec.Command(s.bin, append([]string{
		"--bind", "127.0.0.1", "--port", fmt.Sprint(s.port),
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--loglevel", "warning", "--dir", s.tb.TempDir()}, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on %s does not answer: %v", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pause freezes the server (SIGSTOP): connections are accepted by the kernel
// but nothing answers, as with a server stuck or overloaded.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Stop kills the server; its data is lost.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	if s.cmd == nil {
		s.tb.Fatal("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("signal redis-server: %v", err)
	}
}
