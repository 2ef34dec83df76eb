//go:build linux

package gateway_test

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// hopHelper moves to a process group of its own (staying in its
// session, as "own-group") and becomes a shell whose process hops: when
// its parent (the child of the command upstream) exits, it forks its
// successor and exits, and the successor does so a few times over, so that
// at any time one process of the group runs, each under a new pid: just as
// the gateway stops the session.
func hopHelper() int {
	syscall.Setpgid(0, 0)
	appendPID()
	parent := os.Getppid()
	for end := time.Now().Add(60 * time.Second); syscall.Getppid() == parent; syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) {
		if time.Now().After(end) {
			return 0
		}
	}
	// A raw fork: the successor runs only raw system calls.
	pid, _, _ := syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0)
	for i := 0; pid == 0 && i < 20; i++ {
		// The successor hops on a few times: each forks the next and exits.
		ts := syscall.Timespec{Nsec: 200_000}
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		if pid, _, _ = syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0); pid != 0 {
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
	}
	if pid == 0 {
		ts := syscall.Timespec{Sec: 60}
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	appendPID()
	return 0
}
