package gateway

import (
	"context"
	"errors"

	"github.com/axgate/axgate"
)

// Named is one upstream of a gateway with several (NewMulti).
type Named struct {
	// Name names the upstream in logs, metrics, /readyz and refusals:
	// letters, digits, '_' and '-', unique within the gateway.
	Name string
	// Prefix is put before the names of the upstream's tools in the
	// gateway's tools/list, and taken off a call's name to route it here
	// ("": Name followed by DefaultToolSeparator). The prefixed names must
	// be valid MCP tool names, and no two may be equal.
	Prefix string
	// Enforcer enforces the manifest of this upstream's tools, resources
	// and prompts. Its manifest names them as the upstream does (without
	// Prefix).
	Enforcer *axgate.Enforcer
	// Upstream is the server, as for New.
	Upstream Upstream
	// Options apply to this upstream only, after the gateway's own: those
	// that shape or bound the upstream (WithCallTimeout,
	// WithConnectTimeout, WithMaxUpstreamTools, WithRelistInterval,
	// WithRestartBackoff, WithSandbox, WithRoots, ForwardClientRoots,
	// AllowUpstreamSampling, AllowUpstreamElicitation,
	// KeepUncheckedContent). NewMulti refuses the others.
	Options []Option
}

// DefaultToolSeparator joins an upstream's name and its tools' names when
// Named.Prefix is empty.
const DefaultToolSeparator = "_"

// NewMulti returns a gateway that serves several upstreams behind one
// endpoint: tools/list is the union, per caller, of what each upstream
// offers and its manifest allows, each tool under its upstream's prefix; a
// call goes to the upstream its prefix names, through that upstream's
// enforcer. An upstream that is down has its tools refused
// (upstream_unavailable) while the others answer. opts configure the
// gateway as for New. It fails when two prefixed names collide (naming
// both), or as New does for any one upstream.
func NewMulti(upstreams []Named, opts ...Option) (*Gateway, error) {
	return nil, errors.New("gateway: NewMulti is not built yet")
}

// Reload replaces the gateway's upstreams with upstreams (for New's
// gateway, one Named with an empty Name and Prefix). An upstream whose
// Named is unchanged keeps its sessions; one whose manifest alone changed
// keeps them and is enforced with the new manifest from the next call; one
// that changed otherwise, or is gone, has its sessions closed. On error
// nothing changes.
func (g *Gateway) Reload(ctx context.Context, upstreams []Named) error {
	return errors.New("gateway: Reload is not built yet")
}

// Upstreams reports each upstream's readiness, by name, as Ready checks
// it: nil for one that can serve calls now. /readyz reports them.
func (g *Gateway) Upstreams(ctx context.Context) map[string]error {
	return map[string]error{"": g.Ready(ctx)}
}
