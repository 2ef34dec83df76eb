package main

import (
	"flag"
	"strings"

	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// sandboxFlags are mcp's --sandbox, --sandbox-ro, --sandbox-rw and
// --sandbox-network: the children of --upstream-command under bubblewrap
// (mcpgw.Sandbox).
type sandboxFlags struct {
	mode    string
	ro, rw  rootFlags // absolute paths, as --root
	network bool
}

func (s *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.mode, "sandbox", "off", "run each child of --upstream-command under bubblewrap (bwrap): its own PID namespace, only the system's programs and the --sandbox-ro/--sandbox-rw paths visible, no network: on (start fails where bwrap cannot run, with why), optional (then a warning, and no sandbox) or off")
	fs.Var(&s.ro, "sandbox-ro", "with --sandbox: a path (`PATH`) the child sees read-only (repeatable)")
	fs.Var(&s.rw, "sandbox-rw", "with --sandbox: a path (`PATH`) the child sees and may write (repeatable)")
	fs.BoolVar(&s.network, "sandbox-network", false, "with --sandbox: keep the host's network for the child (default: none, not even the host's 127.0.0.1)")
}

// check is why the flags cannot be used for this upstream, or "".
func (s *sandboxFlags) check(command bool) string {
	switch {
	case s.mode != "off" && s.mode != "on" && s.mode != "optional":
		return "--sandbox is on, optional or off, not " + `"` + s.mode + `"`
	case s.mode == "off" && (len(s.ro) > 0 || len(s.rw) > 0 || s.network):
		return "--sandbox-ro, --sandbox-rw and --sandbox-network are for --sandbox on or optional"
	case s.mode != "off" && !command:
		return "--sandbox contains the children of --upstream-command; an --upstream-url runs no child"
	}
	return ""
}

// option is the gateway's option of the flags (none for off).
func (s *sandboxFlags) option(gopts []mcpgw.Option) []mcpgw.Option {
	if s.mode == "off" {
		return gopts
	}
	return append(gopts, mcpgw.WithSandbox(mcpgw.Sandbox{Mode: s.mode, ReadOnly: s.ro, Writable: s.rw, Network: s.network}))
}

// advice is what to do about a start that failed for the sandbox, "" for
// another failure.
func (s *sandboxFlags) advice(err error) string {
	if s.mode != "on" || !strings.Contains(err.Error(), "sandbox") {
		return ""
	}
	return " (install bubblewrap: apt-get install bubblewrap, dnf install bubblewrap; or run with --sandbox optional to run the children unsandboxed where it cannot run)"
}

// sandboxAdvice is advice for a start of several upstreams that failed for
// an upstream's sandbox, "" for another failure.
func sandboxAdvice(err error) string {
	if !strings.Contains(err.Error(), "sandbox") {
		return ""
	}
	return " (install bubblewrap: apt-get install bubblewrap, dnf install bubblewrap; or give that upstream sandbox: optional to run its children unsandboxed where it cannot run)"
}
