//go:build unix

package gateway

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, whose id is the
// child's pid, so that stopping the child reaches what it started: the
// server behind a wrapper (sh -c, npx, uvx), a helper it left running.
// A process that starts a session of its own (a daemon) leaves the group;
// nothing but the machine's own supervision reaches it.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to every process of the child's group, and to the
// child itself, which may have moved to another group. It reports whether
// either was there to signal.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) bool {
	groupErr := syscall.Kill(-cmd.Process.Pid, sig)
	// Process.Signal knows when the child was reaped, so it never signals
	// another process that was given the pid since.
	childErr := cmd.Process.Signal(sig)
	return childErr == nil || (groupErr == nil || !errors.Is(groupErr, syscall.ESRCH))
}
