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

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/upcreds"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Gateway is an MCP server that stands in front of another one (the
// upstream) and enforces the manifest of its enforcer on every tool call.
// It is safe for concurrent use. Close stops it.
type Gateway struct {
	enf    *axgate.Enforcer
	m      *manifest.Manifest
	up     Upstream
	cfg    config
	access *gate.Access
	// defs are the front's tool definitions, by name: the manifest's
	// description and annotations, the input schema the parameter gate
	// enforces.
	defs map[string]*mcp.Tool
	// order is the manifest's tool names, in manifest order.
	order      []string
	propagator propagation.TextMapPropagator

	httpFront  *front
	localFront *front
	// statelessFront serves MCP 2026-07-28 and later over HTTP
	// (stateless.go).
	statelessFront *front
	handler        http.Handler

	changedCount metric.Int64Counter
	restartCount metric.Int64Counter
	// ownClient is the HTTP client the gateway made for an HTTP upstream
	// given without one; Close closes its idle connections.
	ownClient *http.Client
	// creds are the upstream's credentials (credentials.go), nil without.
	creds *upcreds.Set

	mu      sync.Mutex
	closed  bool
	links   map[*mcp.ServerSession]*link
	control *link // the gateway's own upstream session (HTTP upstreams)
	upCaps  *mcp.ServerCapabilities
	// probeless is a command upstream served to a local client
	// (WithLocalPrincipal): New starts no child of its own; each client
	// session's child, started at its initialize, checks the pins and
	// tells the upstream's capabilities before the initialize is answered
	// (awaitUpstream). One stdio session, one child.
	probeless bool
	changed   map[string]string // disabled tools: name -> digest seen
	missing   map[string]string // reportMissing: what it last logged, by kind

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
	// starts is the gateway-wide back-off of upstream starts.
	starts *breaker

	// directPath is the direct path of tool calls (internal/direct); byID
	// are the streamable HTTP sessions' links by session id, for it.
	directPath *direct.Path
	byID       map[string]*link

	// entries is the enforcer's chain around the upstream for the
	// manifest's resources and prompts (entries.go).
	entries middleware.Invoker

	// ready is Ready's check (ready.go).
	ready readiness
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
	cfg := newConfig(opts)
	if cfg.bearer != nil && (cfg.resource == nil || cfg.resource.Resource == "") {
		return nil, errors.New("gateway: WithBearer needs resource metadata with a Resource")
	}
	if cfg.resource != nil {
		if _, err := metadataURL(cfg.resource.Resource); err != nil {
			return nil, err
		}
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
	contained, serr := containChildren(&cfg, upstream)
	if serr != nil {
		return nil, serr
	}
	cfg.contained = contained
	g := &Gateway{
		enf:        enf,
		m:          enf.Manifest(),
		up:         upstream,
		cfg:        cfg,
		defs:       map[string]*mcp.Tool{},
		propagator: propagation.TraceContext{},
		links:      map[*mcp.ServerSession]*link{},
		changed:    map[string]string{},

		sessionKeys: map[*mcp.ServerSession]string{},
		perKey:      map[string]int{},
		callers:     map[string]*callerLink{},
		ephemeral:   map[*mcp.ServerSession]*callerLink{},
		callsOf:     map[string]int{},
		starts:      &breaker{min: cfg.backoffMin, max: cfg.backoffMax},
		byID:        map[string]*link{},
	}
	if upstream.URL != "" && upstream.HTTPClient == nil {
		g.ownClient = newUpstreamClient()
		g.up.HTTPClient = g.ownClient
	}
	var err error
	if g.creds, err = newCredentials(upstream); err != nil {
		return nil, err
	}
	if g.creds != nil && upstream.URL != "" {
		// Both paths (the SDK's transport, the direct path) send through it.
		g.up.HTTPClient = withCredentials(g.up.HTTPClient, g.creds)
	}
	userArgs, tenantArgs := enf.IdentityArgs()
	g.access = gate.NewAccess(g.m, gates.AccessOptions{UserArgs: userArgs, TenantArgs: tenantArgs})
	for _, t := range enf.Tools() {
		def, ok := mcpgate.Tool(enf, t.Name)
		if !ok {
			continue
		}
		g.defs[t.Name] = def
		g.order = append(g.order, t.Name)
	}
	tools := directTools(g.order, enf.StagesFor)
	g.directPath = direct.New(direct.Config{
		Sessions:        httpSessions{g},
		Tools:           tools,
		SessionTimeout:  cfg.sessionTimeout,
		CallTimeout:     cfg.callTimeout,
		Body:            unreadBody,
		URL:             g.up.URL,
		HTTPClient:      g.up.HTTPClient,
		MaxMessageBytes: cfg.maxMessageBytes,
		Bound:           g.boundResponse,
		Drains:          &g.drains,

		StatelessVersions: statelessVersions(),
		StatelessTools:    statelessDirectTools(tools, g.defs),
		StatelessCall:     g.statelessCall,
		ServerInfo:        cfg.impl,
	})
	g.entries = enf.Wrap(middleware.InvokerFunc(g.forwardEntry))
	meter := cfg.meter.Meter("github.com/axgate/axgate/adapters/mcpgate/gateway")
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

	g.probeless = upstream.Command != "" && cfg.local != nil
	if g.probeless {
		// No child to check the pins and learn the capabilities: the one
		// client's own does, before its initialize is answered. What can
		// be known without starting one is checked now.
		if err := checkCommand(upstream); err != nil {
			return nil, fmt.Errorf("gateway: the upstream cannot be started: %w", err)
		}
		g.httpFront = g.newFront(false, false)
		g.statelessFront = g.newFront(false, true)
		g.localFront = g.newFront(true, false)
		g.handler = g.buildHandler()
		return g, nil
	}

	// The gateway's own session: the tools and capabilities of the
	// upstream at start, checked against the pins now rather than on the
	// first call.
	control := g.newLink(nil, nil)
	control.start()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.connectTimeout)
	defer cancel()
	cs, err := control.session(ctx)
	if err != nil {
		control.close()
		return nil, fmt.Errorf("gateway: the upstream cannot be reached: %w", control.lastError(err))
	}
	if ir := cs.InitializeResult(); ir != nil {
		g.upCaps = ir.Capabilities
	}
	if upstream.Command != "" {
		// A stdio upstream is a process per session: the control one has
		// done its work, the sessions' own children take over.
		control.close()
	} else {
		g.control = control
	}

	g.httpFront = g.newFront(false, false)
	g.statelessFront = g.newFront(false, true)
	if cfg.local != nil {
		g.localFront = g.newFront(true, false)
	}
	g.handler = g.buildHandler()
	return g, nil
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

// awaitUpstream waits for the first connection of a client session's link
// (probeless): its child started, its tools listed and their pins
// checked, within WithConnectTimeout. It records the upstream's
// capabilities for frontCaps and returns why the upstream did not start.
func (g *Gateway) awaitUpstream(ctx context.Context, l *link) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.connectTimeout)
	defer cancel()
	cs, err := l.session(ctx)
	if err != nil {
		return l.lastError(err)
	}
	if ir := cs.InitializeResult(); ir != nil {
		g.mu.Lock()
		g.upCaps = ir.Capabilities
		g.mu.Unlock()
	}
	return nil
}

// Handler serves the gateway over HTTP.
//
// It serves the MCP streamable HTTP transport at /mcp, GET /healthz (200
// while the upstream is reachable, 503 otherwise), and with WithBearer the
// protected resource metadata at /.well-known/oauth-protected-resource. Each
// client session gets its own upstream session.
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
// upstream session, and stops the upstream's child processes.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	links := make([]*link, 0, len(g.links)+1)
	for _, l := range g.links {
		links = append(links, l)
	}
	if g.control != nil {
		links = append(links, g.control)
	}
	links = append(links, g.closeCallersLocked()...)
	g.links = map[*mcp.ServerSession]*link{}
	g.byID = map[string]*link{}
	g.mu.Unlock()

	var wg sync.WaitGroup
	for _, l := range links {
		wg.Go(l.close)
	}
	wg.Go(g.ready.stop)
	wg.Wait()
	if g.ownClient != nil {
		g.ownClient.CloseIdleConnections()
	}
	for _, f := range []*front{g.httpFront, g.localFront, g.statelessFront} {
		if f == nil {
			continue
		}
		for ss := range f.server.Sessions() {
			ss.Close()
		}
	}
	return nil
}

// buildHandler assembles the HTTP routes.
func (g *Gateway) buildHandler() http.Handler {
	mux := http.NewServeMux()
	var sessions http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.httpFront.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: g.cfg.sessionTimeout, Logger: g.cfg.logger})
	if !g.cfg.sdkOnly {
		sessions = g.directPath.Handler(sessions)
	}
	var stateless http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.statelessFront.server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, Logger: g.cfg.logger})
	if !g.cfg.sdkOnly {
		stateless = g.directPath.Stateless(stateless)
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
	g.mu.Lock()
	control := g.control
	g.mu.Unlock()
	if control != nil && control.current() == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"upstream_unavailable"}` + "\n"))
		return
	}
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// frontCaps are the capabilities the gateway announces: tools, and what the
// upstream offers besides (unless ToolsOnly).
func (g *Gateway) frontCaps() *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if g.cfg.toolsOnly {
		return caps
	}
	g.mu.Lock()
	up := g.upCaps
	g.mu.Unlock()
	if up == nil {
		return caps
	}
	// Resources, prompts and completions only where the manifest declares
	// some: the rest is refused.
	m := g.m
	templates := false
	for _, r := range m.Resources {
		templates = templates || r.URITemplate != ""
	}
	if len(m.Resources) > 0 {
		caps.Resources = up.Resources
	}
	if len(m.Prompts) > 0 {
		caps.Prompts = up.Prompts
	}
	if templates || len(m.Prompts) > 0 {
		caps.Completions = up.Completions
	}
	caps.Logging = up.Logging
	return caps
}

// linkFor returns the upstream session of a client session, starting it on
// first use. It ends when the client session ends.
func (g *Gateway) linkFor(f *front, ss *mcp.ServerSession) *link {
	return g.linkWith(f, ss, nil)
}

// linkWith is linkFor, the upstream session started as caller's
// (TokenExchange) when it starts now.
func (g *Gateway) linkWith(f *front, ss *mcp.ServerSession, caller *upcreds.Caller) *link {
	g.mu.Lock()
	if l := g.links[ss]; l != nil {
		g.mu.Unlock()
		return l
	}
	if cl := g.ephemeral[ss]; cl != nil {
		g.mu.Unlock()
		return cl.l
	}
	l := g.newLink(f, ss)
	if caller != nil {
		l.caller.Store(caller)
	}
	if g.closed {
		g.mu.Unlock()
		l.stopUnstarted()
		return l
	}
	g.links[ss] = l
	g.mu.Unlock()
	l.start()
	go func() {
		ss.Wait()
		g.mu.Lock()
		if g.links[ss] == l {
			delete(g.links, ss)
		}
		if id := ss.ID(); id != "" && g.byID[id] == l {
			delete(g.byID, id)
		}
		g.mu.Unlock()
		g.release(ss)
		l.close()
	}()
	return l
}

// dropLink ends the link of a client session whose initialize failed: its
// upstream is not connected again for a session that was never admitted.
func (g *Gateway) dropLink(ss *mcp.ServerSession, l *link) {
	g.mu.Lock()
	if g.links[ss] == l {
		delete(g.links, ss)
	}
	g.mu.Unlock()
	go l.close()
}

// frontLinks returns the upstream sessions of the client sessions.
func (g *Gateway) frontLinks() []*link {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*link, 0, len(g.links))
	for _, l := range g.links {
		out = append(out, l)
	}
	return out
}

// checkPins compares the tools an upstream session listed with the
// manifest's pins, and disables each pinned tool whose definition differs.
func (g *Gateway) checkPins(tools map[string]*mcp.Tool) {
	for _, name := range g.order {
		t, ok := tools[name]
		if !ok {
			continue
		}
		a := g.m.Tool(name)
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
		g.disable(name, a, got)
	}
}

// reportMissing logs a warning naming each name of declared (the
// manifest's, in its order) of the kind ("tool") that the upstream does
// not offer: calls of it are refused with AXAG_INTENT_NOT_FOUND, and an
// operator learns it here rather than from an agent. It logs when always
// is set (at start, and at a re-list) and otherwise only when what is
// missing changed since it last logged, so that every new session of a
// command upstream does not log the same again.
func (g *Gateway) reportMissing(kind string, declared []string, offered func(name string) bool, always bool) {
	var missing []string
	for _, name := range declared {
		if !offered(name) {
			missing = append(missing, name)
		}
	}
	key := strings.Join(missing, "\x00")
	g.mu.Lock()
	if g.missing == nil {
		g.missing = map[string]string{}
	}
	last, seen := g.missing[kind]
	g.missing[kind] = key
	g.mu.Unlock()
	if len(missing) == 0 || (!always && seen && last == key) {
		return
	}
	for _, name := range missing {
		attrs := []any{kind, name}
		if a := g.m.Tool(name); kind == "tool" && a != nil {
			attrs = append(attrs, "intent", a.Intent)
		}
		msg := "the manifest declares a " + kind + " the upstream does not offer"
		if kind == "tool" {
			msg += ": its calls are refused with AXAG_INTENT_NOT_FOUND"
		}
		g.cfg.logger.Warn(msg, attrs...)
	}
}

// disable marks a tool changed, for as long as the gateway runs with this
// manifest: a definition that changes back is not trusted again.
func (g *Gateway) disable(name string, a *manifest.Action, got string) {
	g.mu.Lock()
	_, already := g.changed[name]
	if !already {
		g.changed[name] = got
	}
	g.mu.Unlock()
	if already {
		return
	}
	g.cfg.logger.Warn("upstream tool changed: disabled until the manifest's pin is updated",
		"tool", name, "intent", a.Intent, "upstream_sha256", got, "pinned_sha256", a.UpstreamSHA256)
	g.changedCount.Add(context.Background(), 1, metric.WithAttributes(attribute.String("gen_ai.tool.name", name)))
	for _, l := range g.frontLinks() {
		go l.notifyToolsChanged() // not under the caller's refresh of its own list
	}
}

// isChanged reports whether a tool is disabled because it changed upstream.
func (g *Gateway) isChanged(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.changed[name]
	return ok
}

// mayCall reports whether p passes the access checks of tool that do not
// depend on the arguments: roles, granted scopes, a tenant for a
// tenant-scoped action.
func (g *Gateway) mayCall(p middleware.Principal, tool string) bool {
	a := g.m.Tool(tool)
	if a == nil {
		return false
	}
	call := middleware.NewCall(tool, json.RawMessage("{}"), p)
	call.Action = a
	return g.access.Check(call) == nil
}

// Refusals the gateway makes before the chain runs.

func toolChanged(a *manifest.Action) *axerr.Error {
	return axerr.Newf(axerr.CodeToolChanged, "the upstream's definition of %s changed since the manifest pinned it; the tool is disabled", a.ToolName()).
		WithIntent(a.Intent).
		WithReason(reasons.UpstreamChanged)
}

func unavailable(intent string) *axerr.Error {
	return axerr.New(axerr.CodeStoreUnavailable, "the upstream MCP server is unavailable; the gateway is connecting to it again").
		WithIntent(intent).
		WithReason(reasons.UpstreamUnavailable)
}

func notOffered(a *manifest.Action) *axerr.Error {
	return axerr.Newf(axerr.CodeIntentNotFound, "the upstream MCP server does not offer %s", a.ToolName()).
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
