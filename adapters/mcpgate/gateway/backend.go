package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/upcreds"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// backend is one upstream of the gateway (docs/mcp-gateway.md, "Several
// upstreams"): how it is reached, its options, its own session and
// readiness check. What its manifest decides is its policy, which Reload
// may replace while the upstream's sessions stay.
type backend struct {
	g      *Gateway
	name   string
	prefix string
	// named is the Named the backend was made of, for Reload to compare.
	named Named
	// up is the upstream as the links reach it (its HTTP client with the
	// credentials); cfg the gateway's options with the upstream's own.
	up  Upstream
	cfg config
	// creds are the upstream's credentials (credentials.go), nil without.
	creds *upcreds.Set
	// ownClient is the HTTP client the gateway made for an HTTP upstream
	// given without one; Close closes its idle connections.
	ownClient *http.Client
	// direct sends the calls of this upstream's sessions in one POST
	// (internal/direct: Call and Version only).
	direct *direct.Path
	// starts is the back-off of this upstream's starts.
	starts *breaker
	ready  readiness

	policy atomic.Pointer[policy]

	mu      sync.Mutex
	control *link // the gateway's own upstream session (HTTP upstreams)
	upCaps  *mcp.ServerCapabilities
	// probeless is a command upstream served to a local client
	// (WithLocalPrincipal): no child of the gateway's own; each client
	// session's child, started at its initialize, checks the pins and
	// tells the upstream's capabilities before the initialize is answered
	// (awaitUpstream).
	probeless bool
}

// policy is what a backend's manifest decides: replaced whole by Reload
// when the manifest alone changed.
type policy struct {
	enf    *axgate.Enforcer
	m      *manifest.Manifest
	access *gate.Access
	// defs are the front's tool definitions, by the upstream's name of the
	// tool: the manifest's description and annotations, the input schema
	// the parameter gate enforces, and the name under the prefix.
	defs map[string]*mcp.Tool
	// order is the manifest's tool names, in manifest order.
	order []string
	// direct are the tools whose calls may take the direct path, by their
	// name at the front.
	direct map[string]bool
	// handlers run a tools/call through the enforcer's whole chain
	// (mcpgate's handler), by front kind.
	handlers [frontKinds]mcp.ToolHandler
	// entries is the enforcer's chain around the upstream for the
	// manifest's resources and prompts (entries.go).
	entries middleware.Invoker

	mu      sync.Mutex
	changed map[string]string // disabled tools: name -> digest seen
	missing map[string]string // reportMissing: what it last logged, by kind
}

// pol is the backend's policy now.
func (b *backend) pol() *policy { return b.policy.Load() }

// newBackend makes the backend of n, with cfg the gateway's options and
// n's own on top. It does not connect (start does).
func (g *Gateway) newBackend(n Named, base config) (*backend, error) {
	if n.Enforcer == nil {
		return nil, errors.New("gateway: nil enforcer")
	}
	upstream := n.Upstream
	switch {
	case upstream.URL == "" && upstream.Command == "":
		return nil, errors.New("gateway: the upstream needs a URL or a Command")
	case upstream.URL != "" && upstream.Command != "":
		return nil, errors.New("gateway: the upstream has both a URL and a Command; give one")
	}
	if upstream.URL != "" {
		if u, err := url.Parse(upstream.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("gateway: the upstream URL %q is not an http(s) URL", upstream.URL)
		}
	}
	cfg := base
	if len(n.Options) > 0 {
		if err := upstreamOnly(n.Options); err != nil {
			return nil, err
		}
		for _, o := range n.Options {
			o(&cfg)
		}
		if cfg.backoffMax < cfg.backoffMin {
			cfg.backoffMax = cfg.backoffMin
		}
	}
	if n.Name != "" {
		cfg.logger = cfg.logger.With("upstream", n.Name)
	}
	if err := checkRoots(cfg.roots); err != nil {
		return nil, err
	}
	if cfg.forwardClientRoots && len(cfg.roots) > 0 {
		return nil, errors.New("gateway: WithRoots and ForwardClientRoots exclude each other")
	}
	if cfg.forwardClientRoots && !cfg.toolsOnly {
		cfg.logger.Warn("the clients' roots are forwarded to the upstream (ForwardClientRoots): a client can widen what the upstream reads and writes to any folder it names")
	}
	contained, err := containChildren(&cfg, upstream)
	if err != nil {
		return nil, err
	}
	cfg.contained = contained
	b := &backend{g: g, name: n.Name, prefix: prefixOf(n), named: n, up: upstream, cfg: cfg,
		starts: &breaker{min: cfg.backoffMin, max: cfg.backoffMax}}
	if upstream.URL != "" && upstream.HTTPClient == nil {
		b.ownClient = newUpstreamClient()
		b.up.HTTPClient = b.ownClient
	}
	if b.creds, err = newCredentials(upstream); err != nil {
		return nil, err
	}
	if b.creds != nil && upstream.URL != "" {
		// Both paths (the SDK's transport, the direct path) send through it.
		b.up.HTTPClient = withCredentials(b.up.HTTPClient, b.creds)
	}
	b.direct = direct.New(direct.Config{
		URL:             b.up.URL,
		HTTPClient:      b.up.HTTPClient,
		MaxMessageBytes: cfg.maxMessageBytes,
		Bound:           b.boundResponse,
		Drains:          &g.drains,
	})
	b.policy.Store(b.newPolicy(n.Enforcer))
	b.probeless = upstream.Command != "" && cfg.local != nil
	if b.probeless {
		// No child to check the pins and learn the capabilities: the one
		// client's own does, before its initialize is answered. What can
		// be known without starting one is checked now.
		if err := checkCommand(upstream); err != nil {
			return nil, fmt.Errorf("gateway: the upstream cannot be started: %w", err)
		}
	}
	return b, nil
}

// prefixOf is the prefix of n's tools and prompts: n.Prefix, or its name
// and DefaultToolSeparator ("" for an unnamed upstream, New's).
func prefixOf(n Named) string {
	switch {
	case n.Prefix != "":
		return n.Prefix
	case n.Name == "":
		return ""
	}
	return n.Name + DefaultToolSeparator
}

// newPolicy is the policy of enf's manifest on b.
func (b *backend) newPolicy(enf *axgate.Enforcer) *policy {
	p := &policy{enf: enf, m: enf.Manifest(), defs: map[string]*mcp.Tool{}, direct: map[string]bool{},
		changed: map[string]string{}}
	userArgs, tenantArgs := enf.IdentityArgs()
	p.access = gate.NewAccess(p.m, gates.AccessOptions{UserArgs: userArgs, TenantArgs: tenantArgs})
	for _, t := range enf.Tools() {
		def, ok := mcpgate.Tool(enf, t.Name)
		if !ok {
			continue
		}
		if b.prefix != "" {
			c := *def
			c.Name = b.prefix + def.Name
			def = &c
		}
		p.defs[t.Name] = def
		p.order = append(p.order, t.Name)
	}
	for name := range directTools(p.order, enf.StagesFor) {
		p.direct[b.prefix+name] = true
	}
	for k, f := range b.g.fronts() {
		if f != nil {
			p.handlers[k] = f.toolHandler(enf, b)
		}
	}
	p.entries = enf.Wrap(middleware.InvokerFunc(b.forwardEntry))
	return p
}

// start connects the gateway's own session (HTTP upstreams; a command's
// is closed once it has listed the tools and told the capabilities):
// the tools at start are checked against the pins now rather than on
// the first call. It fails when the upstream cannot be reached within the
// connect timeout.
func (b *backend) start() error {
	if b.probeless {
		return nil
	}
	control := b.newLink(nil, nil, nil)
	control.start()
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.connectTimeout)
	defer cancel()
	cs, err := control.session(ctx)
	if err != nil {
		control.close()
		return fmt.Errorf("gateway: the upstream%s cannot be reached: %w", b.named1(), control.lastError(err))
	}
	b.mu.Lock()
	if ir := cs.InitializeResult(); ir != nil {
		b.upCaps = ir.Capabilities
	}
	b.mu.Unlock()
	if b.up.Command != "" {
		// A stdio upstream is a process per session: the control one has
		// done its work, the sessions' own children take over.
		control.close()
	} else {
		b.mu.Lock()
		b.control = control
		b.mu.Unlock()
	}
	return nil
}

// named1 is " NAME" for a named upstream, for errors.
func (b *backend) named1() string {
	if b.name == "" {
		return ""
	}
	return " " + b.name
}

// stop closes what the backend holds itself: its own session, its
// readiness check, its idle connections. The sessions' links are closed
// by their owners.
func (b *backend) stop() {
	b.mu.Lock()
	control := b.control
	b.control = nil
	b.mu.Unlock()
	var wg sync.WaitGroup
	if control != nil {
		wg.Go(control.close)
	}
	wg.Go(b.ready.stop)
	wg.Wait()
	if b.ownClient != nil {
		b.ownClient.CloseIdleConnections()
	}
}

// caps are the upstream's capabilities, as its first session told them.
func (b *backend) caps() *mcp.ServerCapabilities {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.upCaps
}

// awaitUpstream waits for the first connection of a client session's link
// (probeless): its child started, its tools listed and their pins
// checked, within WithConnectTimeout. It records the upstream's
// capabilities for frontCaps and returns why the upstream did not start.
func (b *backend) awaitUpstream(ctx context.Context, l *link) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.connectTimeout)
	defer cancel()
	cs, err := l.session(ctx)
	if err != nil {
		return l.lastError(err)
	}
	if ir := cs.InitializeResult(); ir != nil {
		b.mu.Lock()
		b.upCaps = ir.Capabilities
		b.mu.Unlock()
	}
	return nil
}

// upstreamSet is the gateway's upstreams, in order, and how names route
// to them.
type upstreamSet struct {
	list []*backend
	// byLength is list, the longest prefix first: a name routes to the
	// first whose prefix it starts with.
	byLength []*backend
	// direct are the tools whose calls may take the direct path, by
	// their name at the front.
	direct map[string]bool
}

func newSet(list []*backend) *upstreamSet {
	s := &upstreamSet{list: list, byLength: append([]*backend(nil), list...), direct: map[string]bool{}}
	sortByPrefix(s.byLength)
	for _, b := range list {
		for name := range b.pol().direct {
			s.direct[name] = true
		}
	}
	return s
}

// route finds the upstream of a name at the front (a tool's, a prompt's)
// by the longest prefix it starts with, and the name the upstream knows.
func (s *upstreamSet) route(name string) (*backend, string) {
	for _, b := range s.byLength {
		if strings.HasPrefix(name, b.prefix) {
			return b, name[len(b.prefix):]
		}
	}
	return nil, ""
}

// resource finds the upstream whose manifest declares uri.
func (s *upstreamSet) resource(uri string) (*backend, *manifest.Resource, map[string]string) {
	for _, b := range s.list {
		if r, vars := b.pol().m.Resource(uri); r != nil {
			return b, r, vars
		}
	}
	return nil, nil, nil
}

// template finds the upstream whose manifest declares the URI template.
func (s *upstreamSet) template(tmpl string) (*backend, *manifest.Resource) {
	for _, b := range s.list {
		for _, r := range b.pol().m.Resources {
			if r.URITemplate != "" && r.URITemplate == tmpl {
				return b, r
			}
		}
	}
	return nil, nil
}

// sortByPrefix orders upstreams the longest prefix first.
func sortByPrefix(list []*backend) {
	slices.SortStableFunc(list, func(a, b *backend) int { return len(b.prefix) - len(a.prefix) })
}

// unavailable is the refusal of a call of b while it is down; with
// several upstreams, its details name it (upstream).
func (b *backend) unavailable(intent string) *axerr.Error {
	e := unavailable(intent)
	if b.g.multi {
		e = e.With("upstream", b.name)
	}
	return e
}

// stateOut tags the request state of a confirmation question about a call
// of b (the input_required result the client echoes back) with b's name,
// and stateIn takes the tag off a state that comes back: a state of
// another upstream's question, or of none, comes back as one that no
// question has ("-"), which mcpgate refuses. Without it, upstreams whose
// chains share an elicitation key (mcpgate.WithElicitationKey, as replicas
// do) would take the person's answer about one upstream's call for the
// same call (tool, intent, arguments) of another.
func (b *backend) stateOut(state string) string { return b.name + ":" + state }

func (b *backend) stateIn(state string) string {
	if state == "" {
		return ""
	}
	if s, ok := strings.CutPrefix(state, b.name+":"); ok {
		return s
	}
	return "-"
}
