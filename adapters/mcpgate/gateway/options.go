package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/middleware"
)

// Upstream is the MCP server the gateway stands in front of: a streamable
// HTTP endpoint (URL), or a command the gateway runs as a child process and
// speaks to over its standard input and output (Command). Exactly one of
// URL and Command is set.
type Upstream struct {
	// URL is the upstream's streamable HTTP endpoint, such as
	// "http://127.0.0.1:9000/mcp".
	URL string
	// HTTPClient carries the requests to URL. The default is a client of
	// the gateway's own that keeps up to 256 idle connections to the
	// upstream; a client given here should keep as many idle connections
	// per host (http.Transport.MaxIdleConnsPerHost) as calls may be in
	// flight, or most calls open a new connection (http.DefaultTransport
	// keeps 2).
	// The client's credentials are never forwarded: give the gateway's own
	// to the upstream here (a Transport that adds them), if it needs any.
	HTTPClient *http.Client

	// Command is the program of a stdio upstream, found in PATH like
	// exec.Command does, and Args its arguments.
	Command string
	Args    []string
	// Env is the child's environment (nil: the gateway's own).
	Env []string
	// Dir is the child's working directory ("" : the gateway's).
	Dir string
	// Stderr receives the child's standard error (nil: discarded).
	Stderr io.Writer
}

// Option configures a Gateway.
type Option func(*config)

type config struct {
	logger         *slog.Logger
	meter          metric.MeterProvider
	toolsOnly      bool
	principal      mcpgate.PrincipalFunc
	local          *middleware.Principal
	bearer         func(*http.Request) (middleware.Principal, error)
	resource       *oauthex.ProtectedResourceMetadata
	mcpOpts        []mcpgate.Option
	backoffMin     time.Duration
	backoffMax     time.Duration
	connectTimeout time.Duration
	sessionTimeout time.Duration
	impl           *mcp.Implementation
}

// Defaults of the options.
const (
	DefaultBackoffMin     = 250 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	DefaultSessionTimeout = 30 * time.Minute
)

func newConfig(opts []Option) config {
	c := config{
		logger:         slog.New(slog.DiscardHandler),
		meter:          otel.GetMeterProvider(),
		principal:      mcpgate.TokenInfoPrincipal,
		backoffMin:     DefaultBackoffMin,
		backoffMax:     DefaultBackoffMax,
		connectTimeout: DefaultConnectTimeout,
		sessionTimeout: DefaultSessionTimeout,
		impl:           &mcp.Implementation{Name: "axgate-mcp-gateway", Version: "v0.1.0"},
	}
	for _, o := range opts {
		o(&c)
	}
	if c.backoffMax < c.backoffMin {
		c.backoffMax = c.backoffMin
	}
	return c
}

// WithLogger logs the gateway's own events: the upstream connecting, dying
// and restarting, and a tool whose definition changed (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMeterProvider records the gateway's metrics with mp (default: the
// global provider): axgate.gateway.tool_changed, counted once per tool that
// is disabled because its upstream definition no longer matches its pin,
// and axgate.gateway.upstream_restarts.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.meter = mp
		}
	}
}

// ToolsOnly refuses everything that is not a tool.
//
// It refuses resources, prompts, completions and logging requests of the
// client (JSON-RPC "method not found"), and the upstream's elicitation,
// sampling and roots requests (the gateway does not offer the upstream
// those capabilities). By default they pass through unchanged.
func ToolsOnly() Option { return func(c *config) { c.toolsOnly = true } }

// WithPrincipal sets how the caller of a streamable HTTP session is found.
//
// The default is mcpgate.TokenInfoPrincipal: the bearer token WithBearer
// verified. It serves tools/list, which lists each caller the tools it may
// call, as well as tools/call. Set it here, not with mcpgate.WithPrincipal
// in WithMCPOptions, which would change the calls but not the list.
func WithPrincipal(f mcpgate.PrincipalFunc) Option {
	return func(c *config) {
		if f != nil {
			c.principal = f
		}
	}
}

// WithLocalPrincipal is the caller of ServeStdio: the local user who
// started the gateway, since stdio has no authentication of its own (as
// examples/mcpserver does). ServeStdio refuses to start without it.
func WithLocalPrincipal(p middleware.Principal) Option {
	return func(c *config) { c.local = &p }
}

// WithBearer makes the streamable HTTP endpoint an OAuth 2.0 protected resource.
//
// That is what the MCP authorization specification asks: every request to
// /mcp needs a bearer token that authenticate accepts (such as
// httpgate.JWTBearer's; the principal it returns is the caller, and its
// "exp" claim the token's expiry), a request without one is answered 401
// with WWW-Authenticate: Bearer resource_metadata="…", and the metadata
// (RFC 9728) is served at /.well-known/oauth-protected-resource. resource
// is that metadata; its Resource, the gateway's public URL of /mcp
// ("https://gw.example.com/mcp"), is required, and should be the audience
// authenticate checks.
func WithBearer(authenticate func(*http.Request) (middleware.Principal, error), resource *oauthex.ProtectedResourceMetadata) Option {
	return func(c *config) {
		c.bearer = authenticate
		c.resource = resource
	}
}

// WithMCPOptions passes options to the tool handler of package mcpgate that
// runs every tools/call (mcpgate.WithoutElicitation,
// mcpgate.WithJSONRPCParamErrors, mcpgate.WithElicitationKey, …). The
// caller is set with WithPrincipal instead.
func WithMCPOptions(opts ...mcpgate.Option) Option {
	return func(c *config) { c.mcpOpts = append(c.mcpOpts, opts...) }
}

// WithRestartBackoff sets how long the gateway waits before connecting again to an upstream.
//
// That is an upstream that died or could not be reached; the wait is min
// after the first failure, doubling on each failure in a row, at most max
// (defaults DefaultBackoffMin and DefaultBackoffMax). Calls in the
// meantime are refused with AXGATE_STORE_UNAVAILABLE, reason
// upstream_unavailable.
func WithRestartBackoff(min, max time.Duration) Option {
	return func(c *config) {
		if min > 0 {
			c.backoffMin = min
		}
		if max > 0 {
			c.backoffMax = max
		}
	}
}

// WithConnectTimeout bounds each attempt to connect to the upstream (start
// the child and initialize the session), and how long a session's first
// request waits for its upstream session (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.connectTimeout = d
		}
	}
}

// WithSessionTimeout closes a streamable HTTP session, and its upstream
// session (for a stdio upstream, its child process), after it has seen no
// request for d (default DefaultSessionTimeout).
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.sessionTimeout = d
		}
	}
}

// WithImplementation names the gateway to its clients (default
// "axgate-mcp-gateway").
func WithImplementation(impl *mcp.Implementation) Option {
	return func(c *config) {
		if impl != nil {
			c.impl = impl
		}
	}
}
