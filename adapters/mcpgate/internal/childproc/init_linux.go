package childproc

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxInit is the init of a sandbox's PID namespace, held as a pidfd
// (fd; -1 for none): kill and wait reach that process only, even after it
// ended and its pid was given to another.
type sandboxInit struct {
	mu sync.Mutex
	fd int
}

// open takes hold of process pid; it holds none where the system has no
// pidfd.
func (s *sandboxInit) open(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.fd = fd
	s.mu.Unlock()
}

// kill sends SIGKILL to the init; it reports whether it did.
func (s *sandboxInit) kill() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd >= 0 && unix.PidfdSendSignal(s.fd, unix.SIGKILL, nil, 0) == nil
}

// wait waits up to d for the init to end; it reports whether it has (or
// there is none). Only close, after it, closes the pidfd.
func (s *sandboxInit) wait(d time.Duration) bool {
	s.mu.Lock()
	fd := s.fd
	s.mu.Unlock()
	if fd < 0 {
		return true
	}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		// A pidfd is readable once its process has ended.
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0
	}
}

// close lets the init go.
func (s *sandboxInit) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
