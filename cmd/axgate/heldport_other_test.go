//go:build !linux

package main

import (
	"net"
	"testing"
)

// listenHeld listens on a port of 127.0.0.1. Elsewhere than on Linux the
// port is not held once the listener is closed: another listener may take
// it, and a test that needs it to refuse connections may see it answer.
func listenHeld(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
