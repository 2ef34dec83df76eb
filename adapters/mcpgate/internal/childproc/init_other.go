//go:build !linux

package childproc

import "time"

// sandboxInit holds nothing where there is no sandbox (bubblewrap runs on
// Linux only).
type sandboxInit struct{ fd int }

func (*sandboxInit) open(int)                {}
func (*sandboxInit) kill() bool              { return false }
func (*sandboxInit) wait(time.Duration) bool { return true }
func (*sandboxInit) close()                  {}
