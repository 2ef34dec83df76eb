package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Gateway is an MCP server that stands in front of other ones (its
// upstreams; New's has one) and enforces the manifest of each one's
// enforcer on every tool call to it. It is safe for concurrent use. Close
// stops it.
type Gateway struct {
	cfg        config
	propagator propagation.TextMapPropagator
	// multi is set for NewMulti's gateway: the upstream's name goes on
	// the call's span.
	multi bool

	httpFront  *front
	localFront *front
	// statelessFront serves MCP 2026-07-28 and later over HTTP
	// (stateless.go).
	statelessFront *front
	handler        http.Handler

	changedCount metric.Int64Counter
	restartCount metric.Int64Counter

	// ups are the upstreams (backend.go); Reload replaces them, under mu.
	ups atomic.Pointer[upstreamSet]
	// reloading serializes Reload.
	reloading sync.Mutex

	mu     sync.Mutex
	closed bool
	// links are the client sessions' upstream sessions (one per upstream
	// each), by client session.
	links map[*mcp.ServerSession]*session

	// sessionKeys are the admitted client sessions and whom they count
	// against; perKey counts them by caller (WithMaxSessions).
	sessionKeys map[*mcp.ServerSession]string
	perKey      map[string]int
	// callers are the stateless callers' links, by sessionKey; ephemeral
	// the link of each stateless request in flight, by its session.
	callers   map[string]*callerLink
	ephemeral map[*mcp.ServerSession]*callerLink
	// callsOf counts the calls in flight by caller.
	callsOf map[string]int

	// directFront is the direct path of tool calls (internal/direct), its
	// front; it is made again when Reload changes the tools. byID are the
	// streamable HTTP sessions by session id, for it.
	directFront atomic.Pointer[directFront]
	// sdk and sdkStateless are the go-sdk's handlers of the session and
	// the stateless front.
	sdk, sdkStateless http.Handler
	byID              map[string]*session

	// drains counts the upstream work after a call returned, the direct
	// path's and upstreamContext's.
	drains direct.Drains
}

// New returns a gateway that enforces enf's manifest in front of upstream.
//
// It connects to the upstream before it returns (starting the child of a
// command upstream), lists its tools and checks each one the manifest pins
// (upstream_sha256) against its definition: a tool that changed is
// disabled from the start. It fails when the upstream cannot be reached
// within the connect timeout (WithConnectTimeout), or when the options
// contradict each other. Serve it with Handler (streamable HTTP) or
// ServeStdio.
//
// A command upstream with WithLocalPrincipal (a stdio gateway, whose one
// client would otherwise have run a second child: New's and its own) is
// the exception: New only checks that the program exists and may be run,
// and each client session's child, started at the client's initialize
// with what that client offers, lists the tools and checks the pins before
// the initialize is answered (so before any call); an upstream that does
// not start then fails that initialize with why. One session, one child.
func New(enf *axgate.Enforcer, upstream Upstream, opts ...Option) (*Gateway, error) {
	if enf == nil {
		return nil, errors.New("gateway: nil enforcer")
	}
	return build([]Named{{Enforcer: enf, Upstream: upstream}}, false, opts)
}

// build makes a gateway of upstreams (New's one, unnamed, or NewMulti's).
func build(upstreams []Named, multi bool, opts []Option) (*Gateway, error) {
	cfg := newConfig(opts)
	if cfg.bearer != nil && (cfg.resource == nil || cfg.resource.Resource == "") {
		return nil, errors.New("gateway: WithBearer needs resource metadata with a Resource")
	}
	if cfg.resource != nil {
		if _, err := metadataURL(cfg.resource.Resource); err != nil {
			return nil, err
		}
	}
	g := &Gateway{
		cfg:        cfg,
		multi:      multi,
		propagator: propagation.TraceContext{},
		links:      map[*mcp.ServerSession]*session{},

		sessionKeys: map[*mcp.ServerSession]string{},
		perKey:      map[string]int{},
		callers:     map[string]*callerLink{},
		ephemeral:   map[*mcp.ServerSession]*callerLink{},
		callsOf:     map[string]int{},
		byID:        map[string]*session{},
	}
	meter := cfg.meter.Meter("github.com/axgate/axgate/adapters/mcpgate/gateway")
	var err error
	if g.changedCount, err = meter.Int64Counter("axgate.gateway.tool_changed",
		metric.WithDescription("Tools disabled because the upstream's definition no longer matches the manifest's upstream_sha256 pin"),
		metric.WithUnit("{tool}")); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if g.restartCount, err = meter.Int64Counter("axgate.gateway.upstream_restarts",
		metric.WithDescription("Upstream sessions connected again after the upstream died or could not be reached"),
		metric.WithUnit("{restart}")); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// The fronts first: each upstream's chain is built for each of them;
	// their tools are added once the upstreams are known.
	g.httpFront = g.newFront(frontHTTP)
	g.statelessFront = g.newFront(frontStateless)
	if cfg.local != nil {
		g.localFront = g.newFront(frontLocal)
	}
	list, err := g.newBackends(upstreams, nil)
	if err != nil {
		return nil, err
	}
	if err := startAll(list); err != nil {
		for _, b := range list {
			b.stop()
		}
		return nil, err
	}
	set := newSet(list)
	g.ups.Store(set)
	g.syncTools(set)
	g.sdk = g.sdkSessions()
	g.sdkStateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.statelessFront.server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, Logger: g.cfg.logger})
	g.setDirectFront(set)
	g.handler = g.buildHandler()
	return g, nil
}

// startAll starts the upstreams together, and fails with the first error.
func startAll(list []*backend) error {
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, b := range list {
		wg.Go(func() { errs[i] = b.start() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// set is the gateway's upstreams now.
func (g *Gateway) set() *upstreamSet { return g.ups.Load() }

// fronts are the gateway's fronts, by kind (nil where it has none).
func (g *Gateway) fronts() [frontKinds]*front {
	return [frontKinds]*front{g.httpFront, g.statelessFront, g.localFront}
}

// syncTools registers the tools of set on every front's server. A tool
// registered there stays registered: the server's registry only hands a
// call to callTool, which routes it by the upstreams of the moment (a
// name no upstream serves now is refused there), and tools/list is the
// gateway's own. Removing a name would let a call that the front passed
// to the server before a Reload find it gone (the go-sdk's "unknown
// tool"); the names are the operator's, bounded by the configurations.
func (g *Gateway) syncTools(set *upstreamSet) {
	for _, f := range g.fronts() {
		if f == nil {
			continue
		}
		for _, b := range set.list {
			p := b.pol()
			for _, name := range p.order {
				f.server.AddTool(p.defs[name], f.callTool)
			}
		}
	}
}

// directFront is the direct path's front for the tools of the upstreams
// now: its handlers of the session and the stateless front.
type directFront struct{ sessions, stateless http.Handler }

// setDirectFront makes the direct path's front for the tools of set. The
// calls it takes go to the front's callTool, which routes them as the
// SDK's.
func (g *Gateway) setDirectFront(set *upstreamSet) {
	defs := map[string]*mcp.Tool{}
	for _, b := range set.list {
		for _, def := range b.pol().defs {
			defs[def.Name] = def
		}
	}
	p := direct.New(direct.Config{
		Sessions:       httpSessions{g},
		Tools:          set.direct,
		SessionTimeout: g.cfg.sessionTimeout,
		CallTimeout:    g.cfg.callTimeout,
		Body:           unreadBody,
		Drains:         &g.drains,

		StatelessVersions: statelessVersions(),
		StatelessTools:    statelessDirectTools(set.direct, defs),
		StatelessCall:     g.statelessCall,
		ServerInfo:        g.cfg.impl,
	})
	g.directFront.Store(&directFront{sessions: p.Handler(g.sdk), stateless: p.Stateless(g.sdkStateless)})
}

// checkCommand checks what can be checked of a command upstream without
// running it: that its program exists and may be run.
func checkCommand(up Upstream) error {
	name := up.Command
	if !strings.ContainsRune(name, filepath.Separator) && !strings.ContainsRune(name, '/') {
		_, err := exec.LookPath(name)
		return err
	}
	if !filepath.IsAbs(name) && up.Dir != "" {
		name = filepath.Join(up.Dir, name) // exec.Cmd runs a relative path from Dir
	}
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", name)
	case runtime.GOOS != "windows" && fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable", name)
	}
	return nil
}

// Handler serves the gateway over HTTP.
//
// It serves the MCP streamable HTTP transport at /mcp, GET /healthz (200
// while an upstream is reachable, 503 otherwise), and with WithBearer the
// protected resource metadata at /.well-known/oauth-protected-resource. Each
// client session gets its own upstream session with each upstream.
func (g *Gateway) Handler() http.Handler { return g.handler }

// ServeStdio serves one client over standard input and output, as the
// local principal (WithLocalPrincipal), until ctx is done or the client
// disconnects.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.serveLocal(ctx, &mcp.StdioTransport{MaxLineLength: int(g.cfg.maxMessageBytes)})
}

func (g *Gateway) serveLocal(ctx context.Context, t mcp.Transport) error {
	if g.localFront == nil {
		return errors.New("gateway: ServeStdio needs the local principal (WithLocalPrincipal)")
	}
	return g.localFront.server.Run(ctx, t)
}

// Close stops the gateway: it closes every client session and every
// upstream session, and stops the upstreams' child processes.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	var links []*link
	for _, s := range g.links {
		links = append(links, s.detachAllLocked()...)
	}
	links = append(links, g.closeCallersLocked()...)
	g.links = map[*mcp.ServerSession]*session{}
	g.byID = map[string]*session{}
	g.mu.Unlock()

	var wg sync.WaitGroup
	for _, l := range links {
		wg.Go(l.close)
	}
	for _, b := range g.set().list {
		wg.Go(b.stop)
	}
	wg.Wait()
	for _, f := range g.fronts() {
		if f == nil {
			continue
		}
		for ss := range f.server.Sessions() {
			ss.Close()
		}
	}
	return nil
}

// sdkSessions is the go-sdk's streamable HTTP handler of the session
// front.
func (g *Gateway) sdkSessions() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.httpFront.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: g.cfg.sessionTimeout, Logger: g.cfg.logger})
}

// buildHandler assembles the HTTP routes.
func (g *Gateway) buildHandler() http.Handler {
	mux := http.NewServeMux()
	sessions := g.sdk
	if !g.cfg.sdkOnly {
		sessions = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.directFront.Load().sessions.ServeHTTP(w, r) })
	}
	stateless := g.sdkStateless
	if !g.cfg.sdkOnly {
		stateless = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.directFront.Load().stateless.ServeHTTP(w, r) })
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if statelessRequest(r) {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	h = checkStandardHeaders(h) // before both paths read the body
	h = limitBody(h, g.cfg.maxMessageBytes)
	if g.cfg.bearer != nil {
		metaURL, _ := metadataURL(g.cfg.resource.Resource) // checked by New
		h = auth.RequireBearerToken(mcpgate.BearerVerifier(verifiedBearer(g.cfg.bearer)), &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: metaURL,
		})(h)
		// Outside the SDK's check, which answers a refusal in plain text:
		// a refused caller gets the AXAG envelope, as for every refusal.
		h = refuseUnauthenticated(g.cfg.bearer, metaURL, h)
		meta := auth.ProtectedResourceMetadataHandler(g.cfg.resource)
		mux.Handle("/.well-known/oauth-protected-resource", meta)
		if u, err := url.Parse(g.cfg.resource.Resource); err == nil && u.Path != "" && u.Path != "/" {
			// RFC 9728 §3.1: the path-suffixed form, which clients try first.
			mux.Handle("/.well-known/oauth-protected-resource"+u.Path, meta)
		}
	}
	mux.Handle("/mcp", h)
	mux.HandleFunc("GET /healthz", g.health)
	return mux
}

// verifiedKey keys the principal refuseUnauthenticated verified, so that
// the SDK's bearer check does not verify the token a second time.
type verifiedKey struct{}

// refuseUnauthenticated answers a request whose bearer token authenticate
// refuses with 401 and the AXAG error envelope (the reason, and for a
// token of another audience the audience expected), with the challenge
// WWW-Authenticate: Bearer resource_metadata="…" (RFC 9728; with
// error="invalid_token" when a token came and was refused, RFC 6750). The
// principal of an accepted one goes on in the request's context.
func refuseUnauthenticated(authenticate func(*http.Request) (middleware.Principal, error), metaURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := authenticate(r)
		if err == nil {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, p)))
			return
		}
		e, ok := axerr.As(err)
		if !ok {
			e = axerr.New(axerr.CodeUnauthenticated, "the request is not authenticated: "+err.Error()).WithCause(err)
		}
		challenge := fmt.Sprintf("Bearer resource_metadata=%q", metaURL)
		if reason, _ := e.Details["reason"].(string); reason != "" && reason != string(reasons.MissingToken) {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		httpgate.WriteError(w, e)
	})
}

// verifiedBearer is authenticate, answered from the request's context when
// refuseUnauthenticated already verified its token.
func verifiedBearer(authenticate func(*http.Request) (middleware.Principal, error)) func(*http.Request) (middleware.Principal, error) {
	return func(r *http.Request) (middleware.Principal, error) {
		if p, ok := r.Context().Value(verifiedKey{}).(middleware.Principal); ok {
			return p, nil
		}
		return authenticate(r)
	}
}

// metadataURL is where the protected resource metadata of resource is
// served: /.well-known/oauth-protected-resource at its origin.
func metadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("gateway: the protected resource %q is not an http(s) URL", resource)
	}
	return u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource", nil
}

func (g *Gateway) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	// Healthy while one upstream is: one down upstream has its calls
	// refused, and the others serve.
	for _, b := range g.set().list {
		b.mu.Lock()
		control := b.control
		b.mu.Unlock()
		if control == nil || control.current() != nil {
			w.Write([]byte(`{"status":"ok"}` + "\n"))
			return
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"status":"upstream_unavailable"}` + "\n"))
}

// frontCaps are the capabilities the gateway announces: tools, and what the
// upstreams offer besides (unless ToolsOnly).
func (g *Gateway) frontCaps() *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if g.cfg.toolsOnly {
		return caps
	}
	for _, b := range g.set().list {
		up := b.caps()
		if up == nil {
			continue
		}
		// Resources, prompts and completions only where the manifest
		// declares some: the rest is refused.
		m := b.pol().m
		templates := false
		for _, r := range m.Resources {
			templates = templates || r.URITemplate != ""
		}
		if len(m.Resources) > 0 && caps.Resources == nil {
			caps.Resources = up.Resources
		}
		if len(m.Prompts) > 0 && caps.Prompts == nil {
			caps.Prompts = up.Prompts
		}
		if (templates || len(m.Prompts) > 0) && caps.Completions == nil {
			caps.Completions = up.Completions
		}
		if caps.Logging == nil {
			caps.Logging = up.Logging
		}
	}
	return caps
}

// checkPins compares the tools an upstream session listed with the
// manifest's pins, and disables each pinned tool whose definition differs.
func (b *backend) checkPins(tools map[string]*mcp.Tool) {
	p := b.pol()
	for _, name := range p.order {
		t, ok := tools[name]
		if !ok {
			continue
		}
		a := p.m.Tool(name)
		if a == nil || a.UpstreamSHA256 == "" {
			continue // no pin, no check
		}
		got, err := mcpgate.ToolDigest(t)
		if err == nil && got == a.UpstreamSHA256 {
			continue
		}
		if err != nil {
			got = "(" + err.Error() + ")"
		}
		b.disable(p, name, a, got)
	}
}

// reportMissing logs a warning naming each name of declared (the
// manifest's, in its order) of the kind ("tool") that the upstream does
// not offer: calls of it are refused with AXAG_INTENT_NOT_FOUND, and an
// operator learns it here rather than from an agent. It logs when always
// is set (at start, and at a re-list) and otherwise only when what is
// missing changed since it last logged, so that every new session of a
// command upstream does not log the same again.
func (b *backend) reportMissing(kind string, declared []string, offered func(name string) bool, always bool) {
	var missing []string
	for _, name := range declared {
		if !offered(name) {
			missing = append(missing, name)
		}
	}
	key := strings.Join(missing, "\x00")
	p := b.pol()
	p.mu.Lock()
	if p.missing == nil {
		p.missing = map[string]string{}
	}
	last, seen := p.missing[kind]
	p.missing[kind] = key
	p.mu.Unlock()
	if len(missing) == 0 || (!always && seen && last == key) {
		return
	}
	for _, name := range missing {
		attrs := []any{kind, name}
		if a := p.m.Tool(name); kind == "tool" && a != nil {
			attrs = append(attrs, "intent", a.Intent)
		}
		msg := "the manifest declares a " + kind + " the upstream does not offer"
		if kind == "tool" {
			msg += ": its calls are refused with AXAG_INTENT_NOT_FOUND"
		}
		b.cfg.logger.Warn(msg, attrs...)
	}
}

// disable marks a tool changed, for as long as the gateway runs with this
// manifest: a definition that changes back is not trusted again.
func (b *backend) disable(p *policy, name string, a *manifest.Action, got string) {
	p.mu.Lock()
	_, already := p.changed[name]
	if !already {
		p.changed[name] = got
	}
	p.mu.Unlock()
	if already {
		return
	}
	b.cfg.logger.Warn("upstream tool changed: disabled until the manifest's pin is updated",
		"tool", name, "intent", a.Intent, "upstream_sha256", got, "pinned_sha256", a.UpstreamSHA256)
	attrs := []attribute.KeyValue{attribute.String("gen_ai.tool.name", b.prefix+name)}
	if b.g.multi {
		attrs = append(attrs, attribute.String("axgate.upstream", b.name))
	}
	b.g.changedCount.Add(context.Background(), 1, metric.WithAttributes(attrs...))
	for _, s := range b.g.sessions() {
		go s.notifyToolsChanged() // not under the caller's refresh of its own list
	}
}

// isChanged reports whether a tool is disabled because it changed upstream.
func (p *policy) isChanged(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.changed[name]
	return ok
}

// mayCall reports whether pr passes the access checks of tool that do not
// depend on the arguments: roles, granted scopes, a tenant for a
// tenant-scoped action.
func (p *policy) mayCall(pr middleware.Principal, tool string) bool {
	a := p.m.Tool(tool)
	if a == nil {
		return false
	}
	call := middleware.NewCall(tool, json.RawMessage("{}"), pr)
	call.Action = a
	return p.access.Check(call) == nil
}

// Refusals the gateway makes before the chain runs.

// toolChanged and notOffered name the tool as the client does (front: with
// its upstream's prefix).
func toolChanged(a *manifest.Action, front string) *axerr.Error {
	return axerr.Newf(axerr.CodeToolChanged, "the upstream's definition of %s changed since the manifest pinned it; the tool is disabled", front).
		WithIntent(a.Intent).
		WithReason(reasons.UpstreamChanged)
}

func unavailable(intent string) *axerr.Error {
	return axerr.New(axerr.CodeStoreUnavailable, "the upstream MCP server is unavailable; the gateway is connecting to it again").
		WithIntent(intent).
		WithReason(reasons.UpstreamUnavailable)
}

func notOffered(a *manifest.Action, front string) *axerr.Error {
	return axerr.Newf(axerr.CodeIntentNotFound, "the upstream MCP server does not offer %s", front).
		WithIntent(a.Intent).
		WithSuggestion("Call tools/list and use one of the tools it lists.")
}

// legacyVersions are the protocol versions the session front speaks: those
// with sessions (up to 2025-11-25), since each client session maps to one
// upstream session. Newer requests go to the stateless front
// (statelessVersions).
func legacyVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" })
}
