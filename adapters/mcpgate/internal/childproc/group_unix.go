//go:build unix

package childproc

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a session of its own, whose id (and its first
// process group's) is the child's pid, so that stopping the child reaches
// what it started: the server behind a wrapper (sh -c, npx, uvx), a helper
// it left running, also one that moved to another process group of the
// session (as exec.Cmd with Setpgid, Python's process_group or a shell's
// job control do). A process that starts a session of its own (a daemon)
// leaves it; nothing but the machine's own supervision reaches it.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}

// signalGroup sends sig to every process of the child's session (where the
// system lists them: Linux), to its first process group, and to the child
// itself. It reports whether any of them was there to signal.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) bool {
	sid := cmd.Process.Pid
	found := false
	if sig == syscall.SIGKILL {
		found = killSession(sid)
	} else {
		for _, pid := range sessionMembers(sid) {
			if syscall.Kill(pid, sig) == nil {
				found = true
			}
		}
	}
	if err := syscall.Kill(-sid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
		found = true
	}
	// Process.Signal knows when the child was reaped, so it never signals
	// another process that was given the pid since.
	if cmd.Process.Signal(sig) == nil {
		found = true
	}
	return found
}

// killSessionPasses bounds killSession's passes over the session's list;
// killSessionEmptyPasses is how many empty ones in a row end it.
const (
	killSessionPasses      = 50
	killSessionEmptyPasses = 3
)

// killSession kills every process of session sid, pass after pass until
// one finds none running: a process may fork between the list and the
// kill, and its successor is only on the next list. Each pass stops the
// listed processes before it kills them, so that none forks again.
func killSession(sid int) bool {
	found, empty := false, 0
	for range killSessionPasses {
		pids := sessionMembers(sid)
		if len(pids) == 0 {
			// A process that forks as the list is read can be missed by
			// one pass: only a few empty passes in a row end the kill.
			if empty++; empty == killSessionEmptyPasses {
				break
			}
			time.Sleep(time.Millisecond)
			continue
		}
		found, empty = true, 0
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond) // let the killed end, not to list them again
	}
	return found
}

// signalSandbox sends sig to the processes of the session of bwrap (the
// sandbox's processes, in their PID namespace), not to bwrap itself: bwrap
// does not pass a signal on to its child, and one that ended bwrap would
// end the sandbox at once (--die-with-parent) rather than let its server
// stop. The sandbox's init ignores it (an init takes only the signals it
// handles). It reports whether any of them was there to signal.
func signalSandbox(cmd *exec.Cmd, sig syscall.Signal) bool {
	found := false
	for _, pid := range sessionMembers(cmd.Process.Pid) {
		if syscall.Kill(pid, sig) == nil {
			found = true
		}
	}
	return found
}
