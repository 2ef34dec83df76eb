package childproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Sandbox, when set, runs the child under bubblewrap (see Sandbox).
	Sandbox *Sandbox
	// Grace replaces the package's Grace when positive (tests).
	Grace time.Duration
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
	grace  time.Duration
	exited atomic.Pointer[os.ProcessState]
	// sandboxed: cmd is bwrap; init is the sandbox's first process (its
	// PID namespace's init), known once Connect started it. err is why the
	// sandbox's command could not be made.
	sandboxed bool
	init      sandboxInit
	err       error
}

// NewTransport returns a Transport for c whose lines are bounded to limit
// bytes; cut is set when a line was over it.
func NewTransport(c Command, limit int64, cut *atomic.Bool) *Transport {
	t := &Transport{limit: limit, cut: cut, grace: Grace, init: sandboxInit{fd: -1}}
	if c.Grace > 0 {
		t.grace = c.Grace
	}
	if c.Sandbox != nil {
		args, err := c.Sandbox.bwrapArgs(c)
		t.cmd, t.err, t.sandboxed = exec.Command(c.Sandbox.Bwrap, args...), err, true
	} else {
		t.cmd = exec.Command(c.Path, c.Args...)
		t.cmd.Dir = c.Dir
	}
	t.cmd.Env = c.Env
	t.cmd.Stderr = c.Stderr
	t.cmd.WaitDelay = waitDelay
	ownGroup(t.cmd)
	return t
}

// signal sends sig to the child and what it started (signalGroup); for a
// sandboxed child, SIGKILL kills the sandbox's init, whose end the kernel
// makes the end of every process of its PID namespace (bwrap then exits),
// and another signal goes to the sandbox's processes (signalSandbox).
func (t *Transport) signal(sig syscall.Signal) bool {
	if !t.sandboxed {
		return signalGroup(t.cmd, sig)
	}
	if sig == syscall.SIGKILL {
		if t.init.kill() {
			return true
		}
		return signalGroup(t.cmd, sig) // no init (ended, or not known): what is left of the session
	}
	return signalSandbox(t.cmd, sig)
}

// settle waits, once bwrap has exited, for the end of the sandbox's init:
// the kernel ends it only after every other process of its PID namespace,
// but bwrap exits as soon as the init told it the child's status, before.
// An init still there after Grace is killed, and waited for Grace more.
// Without a pidfd (Linux before 5.3) there is nothing to wait on: the
// session's kill passes (signalGroup) are all there is.
func (t *Transport) settle() {
	if !t.init.wait(t.grace) {
		t.init.kill()
		t.init.wait(t.grace)
	}
	t.init.close()
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
	if t.sandboxed {
		if t.err != nil {
			return nil, fmt.Errorf("sandbox: %w", t.err)
		}
		if err := t.startSandbox(); err != nil {
			return nil, err
		}
	} else if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	pipe := &mcp.IOTransport{
		Reader:        &boundedLines{r: stdout, limit: t.limit, cut: t.cut, kill: func() { t.signal(syscall.SIGKILL) }},
		Writer:        &childStdin{WriteCloser: stdin, cmd: t.cmd, grace: t.grace, signal: t.signal, settle: t.settle, exited: &t.exited},
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
	grace  time.Duration
	signal func(syscall.Signal) bool
	settle func()
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
		defer c.signal(syscall.SIGKILL)
		// A sandbox's processes have all ended once its init has.
		defer c.settle()
		defer func() {
			if c.cmd.ProcessState != nil { // Wait has returned
				c.exited.Store(c.cmd.ProcessState)
			}
		}()
		select {
		case c.err = <-exited:
			return
		case <-time.After(c.grace):
		}
		if c.signal(syscall.SIGTERM) {
			select {
			case c.err = <-exited:
				return
			case <-time.After(c.grace):
			}
		}
		c.signal(syscall.SIGKILL)
		c.err = <-exited
	})
	return c.err
}

// startSandbox starts bwrap and learns the sandbox's init from bwrap's
// --info-fd (its pid in the gateway's PID namespace), which it holds as a
// pidfd (sandboxInit): the init is signalled and waited for, never another
// process given its pid since.
func (t *Transport) startSandbox() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	t.cmd.ExtraFiles = []*os.File{w} // fd 3
	args := t.cmd.Args
	t.cmd.Args = append([]string{args[0], "--info-fd", "3"}, args[1:]...)
	err = t.cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	// bwrap writes the info once the sandbox is set up and closes it; a
	// bwrap that failed closes it unwritten as it exits.
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil || info.ChildPID <= 0 {
		return nil // the child's exit says why (the Upstream's Stderr has bwrap's words)
	}
	t.init.open(info.ChildPID)
	return nil
}
