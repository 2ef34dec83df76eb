//go:build !unix

package childproc

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup does nothing where there are no process groups: stopping the
// child reaches the child only.
func ownGroup(*exec.Cmd) {}

// signalGroup stops the child: SIGKILL kills it, any other signal is sent
// as it is (where the system cannot send it, the caller goes on to
// SIGKILL).
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) bool {
	if sig == syscall.SIGKILL {
		return cmd.Process.Kill() == nil
	}
	return cmd.Process.Signal(os.Signal(sig)) == nil
}

// signalSandbox is signalGroup where there is no sandbox.
func signalSandbox(cmd *exec.Cmd, sig syscall.Signal) bool { return signalGroup(cmd, sig) }
