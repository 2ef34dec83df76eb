package gateway

import (
	"errors"
	"fmt"
	"slices"

	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
)

// Sandbox contains the children of a command upstream under bubblewrap (bwrap, Linux).
//
// Each child runs in a PID namespace of its own, so that its stop ends
// every process it started, whatever it forks; it sees only the system's
// programs and libraries read-only (/usr, /bin, /lib*, and the files of
// /etc that programs need to run), its own program and #! interpreter, a
// /proc of its own, a minimal /dev, an empty /tmp, and the paths listed
// here; it has no network unless Network, and no capability. The whole
// list is in docs/mcp-gateway.md, "Contained children".
type Sandbox struct {
	// Mode is "on" (New fails when bubblewrap is missing or cannot start
	// a sandbox here, with why), "optional" (New then logs a warning and
	// runs the children unsandboxed) or "off" (the default, as "").
	Mode string
	// ReadOnly and Writable are absolute paths the child sees, read-only
	// or writable, at the same place; New fails on one that does not
	// exist. A path in both is writable.
	ReadOnly []string
	Writable []string
	// Network keeps the host's network for the child; without it the
	// child has only a loopback of its own, and reaches nothing, the
	// host's 127.0.0.1 included.
	Network bool
}

// WithSandbox runs the children of a command upstream under bubblewrap, as s says.
//
// New fails for an HTTP upstream with a Mode other than "off".
func WithSandbox(s Sandbox) Option {
	return func(c *config) { c.sandbox = s }
}

// containChildren checks the sandbox of cfg for upstream up and finds
// bubblewrap: the childproc.Sandbox each child is started in, or nil (no
// sandbox asked, or "optional" and none can run here: logged).
func containChildren(cfg *config, up Upstream) (*childproc.Sandbox, error) {
	s := cfg.sandbox
	switch s.Mode {
	case "", "off":
		return nil, nil
	case "on", "optional":
	default:
		return nil, fmt.Errorf("gateway: sandbox mode %q: want on, optional or off", s.Mode)
	}
	if up.Command == "" {
		return nil, errors.New("gateway: a sandbox contains the children of a command upstream; this upstream is a URL")
	}
	cs := &childproc.Sandbox{ReadOnly: slices.Clone(s.ReadOnly), Writable: slices.Clone(s.Writable), Network: s.Network}
	if err := cs.Check(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	bwrap, err := childproc.FindBwrap(s.Network)
	if err != nil {
		if s.Mode == "on" {
			return nil, fmt.Errorf("gateway: the upstream's sandbox: %w", err)
		}
		cfg.logger.Warn("the upstream's children run unsandboxed (sandbox optional): bubblewrap cannot run here", "reason", err.Error())
		return nil, nil
	}
	cs.Bwrap = bwrap
	if err := cs.CheckCommand(childproc.Command{Path: up.Command, Args: up.Args, Env: childproc.Env(up.InheritEnv, up.Env), Dir: up.Dir}); err != nil {
		return nil, fmt.Errorf("gateway: the upstream's sandbox: %w", err)
	}
	return cs, nil
}
