package childproc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrTooLarge is why a connection was cut: the child wrote a line (one
// JSON-RPC message) longer than the Transport's limit.
var ErrTooLarge = errors.New("childproc: message larger than the bound")

// Grace is how long the stop waits after closing the child's standard
// input, and after SIGTERM, before the next step.
const Grace = 5 * time.Second

// waitDelay is how long the child's standard error is still copied after
// the child exited (exec.Cmd.WaitDelay): a helper it left running may keep
// the stream open, and Wait, with the stop, would wait for the helper.
const waitDelay = 2 * time.Second

// Command is the child to start.
type Command struct {
	Path   string   // the program, looked up in PATH as exec.Command does
	Args   []string // its arguments
	Env    []string // its whole environment (see Env)
	Dir    string   // its working directory; empty is the caller's
	Stderr io.Writer
}

// Env is the environment of a child: PATH and HOME of this process, then
// extra; or this process's whole environment, then extra, with inherit.
func Env(inherit bool, extra []string) []string {
	if inherit {
		return append(os.Environ(), extra...)
	}
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// Transport is an mcp.Transport that starts one child on Connect. A line
// of the child longer than the limit cuts the connection with ErrTooLarge,
// sets the cut flag and kills the child. Closing the connection stops the
// child and its session (see the package doc). A Transport connects once.
type Transport struct {
	cmd    *exec.Cmd
	limit  int64
	cut    *atomic.Bool
	exited atomic.Pointer[os.ProcessState]
}

// NewTransport returns a Transport for c whose lines are bounded to limit
// bytes; cut is set when a line was over it.
func NewTransport(c Command, limit int64, cut *atomic.Bool) *Transport {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Stderr = c.Stderr
	cmd.WaitDelay = waitDelay
	ownGroup(cmd)
	return &Transport{cmd: cmd, limit: limit, cut: cut}
}

// Exited is the child's exit status once the stop waited for it, else nil.
func (t *Transport) Exited() *os.ProcessState { return t.exited.Load() }

// Connect starts the child, unless ctx has ended.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // start no child for a caller that is gone
	}
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	pipe := &mcp.IOTransport{
		Reader:        &boundedLines{r: stdout, limit: t.limit, cut: t.cut, kill: func() { signalGroup(t.cmd, syscall.SIGKILL) }},
		Writer:        &childStdin{WriteCloser: stdin, cmd: t.cmd, exited: &t.exited},
		MaxLineLength: int(t.limit) + 1,
	}
	return pipe.Connect(ctx)
}

// boundedLines cuts a child's output whose line is longer than limit.
type boundedLines struct {
	r     io.Reader
	limit int64
	cut   *atomic.Bool
	n     int64
	// kill stops the child: after a cut line the stream cannot be read
	// on, and a child blocked writing the rest would not exit.
	kill func()
}

func (b *boundedLines) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			b.n = 0
			continue
		}
		if b.n++; b.n > b.limit {
			b.cut.Store(true)
			b.kill()
			return 0, ErrTooLarge
		}
	}
	return n, err
}

// Close does not close the pipe: Wait does, once the child has exited.
func (b *boundedLines) Close() error { return nil }

// childStdin is the child's standard input; closing it stops the child
// and its session (see the package doc).
type childStdin struct {
	io.WriteCloser
	cmd    *exec.Cmd
	once   sync.Once
	err    error
	exited *atomic.Pointer[os.ProcessState]
}

func (c *childStdin) Close() error {
	c.once.Do(func() {
		c.WriteCloser.Close()
		exited := make(chan error, 1)
		go func() { exited <- c.cmd.Wait() }()
		// The session's id stays the child's while any of its processes
		// runs, so the last SIGKILL, after Wait, reaches only what the
		// child left.
		defer signalGroup(c.cmd, syscall.SIGKILL)
		defer func() {
			if c.cmd.ProcessState != nil { // Wait has returned
				c.exited.Store(c.cmd.ProcessState)
			}
		}()
		select {
		case c.err = <-exited:
			return
		case <-time.After(Grace):
		}
		if signalGroup(c.cmd, syscall.SIGTERM) {
			select {
			case c.err = <-exited:
				return
			case <-time.After(Grace):
			}
		}
		signalGroup(c.cmd, syscall.SIGKILL)
		c.err = <-exited
	})
	return c.err
}
