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
	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
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
	// Env is added to the child's environment, which is otherwise only
	// the gateway's PATH and HOME: the gateway's own secrets do not reach
	// a server that has no need of them.
	Env []string
	// InheritEnv gives the child the gateway's whole environment (then
	// Env), as before the minimal default.
	InheritEnv bool
	// Dir is the child's working directory ("" : the gateway's).
	Dir string
	// Stderr receives the child's standard error (nil: discarded).
	Stderr io.Writer

	// Credentials are the gateway's own credentials to the upstream
	// (UpstreamCredentials): headers and tokens for an HTTP upstream,
	// environment variables for a command's child.
	Credentials *UpstreamCredentials
}

// Option configures a Gateway.
type Option func(*config)

type config struct {
	logger    *slog.Logger
	meter     metric.MeterProvider
	toolsOnly bool
	// keepUncheckedContent: KeepUncheckedContent.
	keepUncheckedContent bool
	principal            mcpgate.PrincipalFunc
	local                *middleware.Principal
	bearer               func(*http.Request) (middleware.Principal, error)
	resource             *oauthex.ProtectedResourceMetadata
	mcpOpts              []mcpgate.Option
	backoffMin           time.Duration
	backoffMax           time.Duration
	connectTimeout       time.Duration
	sessionTimeout       time.Duration
	impl                 *mcp.Implementation

	maxSessions             int
	maxSessionsPerPrincipal int
	maxMessageBytes         int64
	callTimeout             time.Duration
	maxCallsPerSession      int
	maxCallsPerPrincipal    int
	maxToolPages            int
	maxTools                int
	maxPendingUpstream      int
	relistInterval          time.Duration

	// roots are the operator's (WithRoots); forwardClientRoots,
	// allowSampling and allowElicitation pass the upstream's requests to
	// the client (asks.go).
	roots              []*mcp.Root
	forwardClientRoots bool
	allowSampling      bool
	allowElicitation   bool

	// sandbox is WithSandbox's; contained is the sandbox New found for
	// it, nil for none (containChildren).
	sandbox   Sandbox
	contained *childproc.Sandbox

	// trustClientElicitation lets the client's answer to the gateway's
	// confirmation question (form elicitation) count as the person's
	// (WithTrustClientElicitation).
	trustClientElicitation bool

	// sdkOnly sends every request through the SDK's server and client,
	// never the direct path (withoutDirect: the benchmark's and the
	// conformance suite's baseline).
	sdkOnly bool

	// childGrace, when positive, replaces childproc.Grace: the wait
	// between the steps of a child's stop (tests).
	childGrace time.Duration
}

// Defaults of the options.
const (
	defaultBackoffMin     = 250 * time.Millisecond
	defaultBackoffMax     = 30 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	defaultSessionTimeout = 30 * time.Minute

	// defaultMaxSessions bounds the client sessions of the gateway, and
	// so the child processes of a command upstream (one per session).
	defaultMaxSessions = 256
	// defaultMaxSessionsPerPrincipal bounds the client sessions of one
	// caller (user id and tenant).
	defaultMaxSessionsPerPrincipal = 16
	// defaultMaxMessageBytes bounds each message the upstream sends (and
	// so a tools/call result relayed to the client) and each request
	// body a client posts to /mcp.
	defaultMaxMessageBytes = 4 << 20
	// defaultCallTimeout bounds how long a tools/call waits for the
	// upstream.
	defaultCallTimeout = 60 * time.Second
	// defaultMaxCallsPerSession bounds the tools/call in flight of one
	// client session.
	defaultMaxCallsPerSession = 16
	// defaultMaxCallsPerPrincipal bounds the tools/call in flight of one
	// caller (user id and tenant), over all its sessions.
	defaultMaxCallsPerPrincipal = 64
	// defaultMaxToolPages and defaultMaxTools bound the upstream's
	// tools/list: its pages and its tools.
	defaultMaxToolPages = 100
	defaultMaxTools     = 1000
	// defaultMaxPendingUpstreamRequests bounds the upstream's requests to
	// one client (elicitation, sampling, roots) awaiting an answer.
	defaultMaxPendingUpstreamRequests = 4
	// defaultRelistInterval is the least time between two lists of an
	// upstream session's tools on its notifications/tools/list_changed.
	defaultRelistInterval = time.Second
)

func newConfig(opts []Option) config {
	c := config{
		logger:         slog.New(slog.DiscardHandler),
		meter:          otel.GetMeterProvider(),
		principal:      mcpgate.BearerPrincipal,
		backoffMin:     defaultBackoffMin,
		backoffMax:     defaultBackoffMax,
		connectTimeout: DefaultConnectTimeout,
		sessionTimeout: defaultSessionTimeout,
		impl:           &mcp.Implementation{Name: "axgate-mcp-gateway", Version: "v0.1.0"},

		maxSessions:             defaultMaxSessions,
		maxSessionsPerPrincipal: defaultMaxSessionsPerPrincipal,
		maxMessageBytes:         defaultMaxMessageBytes,
		callTimeout:             defaultCallTimeout,
		maxCallsPerSession:      defaultMaxCallsPerSession,
		maxCallsPerPrincipal:    defaultMaxCallsPerPrincipal,
		maxToolPages:            defaultMaxToolPages,
		maxTools:                defaultMaxTools,
		maxPendingUpstream:      defaultMaxPendingUpstreamRequests,
		relistInterval:          defaultRelistInterval,
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
// client (JSON-RPC "method not found"), even those the manifest declares,
// and the upstream's elicitation, sampling and requests for the client's
// roots even where AllowUpstreamSampling, AllowUpstreamElicitation or
// ForwardClientRoots allow them. The operator's roots (WithRoots) are given
// either way. Without it, resources, prompts and completions are served
// only as the manifest declares them (see the package documentation), so a
// manifest that declares none already serves tools only.
func ToolsOnly() Option { return func(c *config) { c.toolsOnly = true } }

// WithRoots are the roots the upstream is given.
//
// The gateway offers the upstream the roots capability and answers its
// roots/list with these, for every session. Each is a file:// URI of an absolute path ("file:///srv/notes"); New fails
// otherwise, and with ForwardClientRoots. By default there are none, and
// the upstream is not offered the capability: a server such as
// @modelcontextprotocol/server-filesystem then keeps the folders it was
// started with.
//
// A client's roots never reach the upstream (unless ForwardClientRoots):
// they are the agent's claim of what the upstream may touch, which the
// manifest does not check.
func WithRoots(roots ...*mcp.Root) Option {
	return func(c *config) { c.roots = append(c.roots, roots...) }
}

// ForwardClientRoots gives the upstream the client's roots instead of the operator's.
//
// That was the behaviour before roots were the operator's.
//
// The upstream is offered the roots capability when the client offers it;
// its roots/list is forwarded to the client, within
// WithMaxPendingUpstreamRequests, and the client's
// notifications/roots/list_changed to the upstream. A client can then
// widen what a server such as server-filesystem reads and writes to any
// folder it names, "/" included: New logs a warning. It contradicts
// WithRoots.
func ForwardClientRoots() Option { return func(c *config) { c.forwardClientRoots = true } }

// AllowUpstreamSampling passes the upstream's sampling/createMessage to the client.
//
// That is when the client offers sampling, within
// WithMaxPendingUpstreamRequests; each is logged with the upstream's
// identity. By default the upstream is not offered sampling, and a
// sampling/createMessage it sends anyway is refused with a JSON-RPC
// "method not found" error (and logged): the agent's model never writes
// what the upstream asks it to.
func AllowUpstreamSampling() Option { return func(c *config) { c.allowSampling = true } }

// AllowUpstreamElicitation passes the upstream's elicitation/create to the client.
//
// That is when the client offers elicitation, within
// WithMaxPendingUpstreamRequests; each is logged with the upstream's
// identity. By default the upstream is not offered elicitation, and an
// elicitation/create it sends anyway is refused with a JSON-RPC "method
// not found" error (and logged): the person is never asked what the
// upstream wants in the gateway's name. The gateway's own confirmation
// question (a confirmation_required call) is asked either way.
func AllowUpstreamElicitation() Option { return func(c *config) { c.allowElicitation = true } }

// WithTrustClientElicitation lets a client's answer to the confirmation question count as the person's.
//
// By default the gateway never asks its confirmation question by form
// elicitation: the client is the agent's, and a client (or a program
// behind it) can answer "accept" by itself, confirming a call no person
// saw. A call that needs the person's confirmation then needs a token a
// person gave (a page of axgate.WithDecisionPages, a signed confirmation),
// and a client that declares URL-mode elicitation is sent to the call's
// page. With this option a client that supports form elicitation is asked
// inline and its answer confirms the call: use it only where the client is
// the person's own app (stdio on their desktop). Approvals never come
// from elicitation.
func WithTrustClientElicitation() Option { return func(c *config) { c.trustClientElicitation = true } }

// KeepUncheckedContent passes an upstream result on as the upstream wrote it.
//
// That is its content blocks and _meta also where they are not what was
// checked.
//
// By default, the result of an action with postconditions or an
// output_schema reaches the client as the data those checked: when the
// upstream sent structuredContent (which is what they check), the content
// blocks are replaced by one text block with its JSON, unless they are
// exactly that already, so that no text or image beside the checked data
// reaches the model unchecked (a prose summary the upstream wrote is lost
// with it); without structuredContent, content that is all text blocks
// keeps their text but not their _meta and annotations; the result's other fields (_meta,
// requestState, inputRequests), which neither check reads, are dropped. A result of an action with neither check is passed on
// unchanged either way.
func KeepUncheckedContent() Option { return func(c *config) { c.keepUncheckedContent = true } }

// WithPrincipal sets how the caller of a streamable HTTP session is found.
//
// The default is mcpgate.BearerPrincipal: the bearer token WithBearer
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
// (defaults 250ms and 30s). Calls in the
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
// request waits for its upstream session (default 30s).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.connectTimeout = d
		}
	}
}

// WithSessionTimeout closes a streamable HTTP session, and its upstream
// session (for a stdio upstream, its child process), after it has seen no
// request for d (default 30m).
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

// WithMaxSessions bounds the client sessions, in total and per caller.
//
// total bounds them all (default 256), perPrincipal those of
// one caller, its user id and tenant (default
// 16); sessions whose caller cannot be found
// at initialize count as one anonymous caller. A new session beyond a
// bound is refused at initialize with a JSON-RPC error whose data is the
// AXAG error: AXGATE_STORE_UNAVAILABLE (503) when the gateway is full,
// AXAG_RATE_LIMITED (429) when the caller is, reason too_many_sessions. The sessions already open are not affected; one that
// ends (or is idle for WithSessionTimeout) frees its place. Since a command
// upstream runs one child process per session, this bounds the children
// too (total, plus the one New starts to check the pins). 0 leaves a bound
// at its default.
func WithMaxSessions(total, perPrincipal int) Option {
	return func(c *config) {
		if total > 0 {
			c.maxSessions = total
		}
		if perPrincipal > 0 {
			c.maxSessionsPerPrincipal = perPrincipal
		}
	}
}

// WithMaxMessageBytes bounds the size of one message (default 4 MiB).
//
// It is each message the upstream sends (a JSON-RPC line of a command
// upstream, a JSON body or one server-sent event of an HTTP upstream) and
// each request body a client posts to /mcp (413 beyond it). An upstream
// message beyond it cuts the upstream session, which is connected again;
// the call it answered is refused with AXGATE_TOOL_FAILED, reason
// result_too_large.
func WithMaxMessageBytes(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxMessageBytes = n
		}
	}
}

// WithCallTimeout bounds how long a tools/call waits for the upstream.
//
// The default is 60s. A call that times out is refused with
// AXGATE_TOOL_FAILED, reason upstream_timeout, and cancelled upstream. The
// time counts from when the chain lets the call through (a confirmation
// asked by the gateway is before it) and includes the upstream's own
// questions to the person (elicitation) while it runs: raise it for an
// upstream that asks. It also bounds how long a call waits for a re-list
// after notifications/tools/list_changed.
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.callTimeout = d
		}
	}
}

// WithMaxCallsPerSession bounds the tools/call in flight of one client
// session (default 16); one more is refused at once
// with AXAG_RATE_LIMITED, reason too_many_calls. With WithMaxSessions it
// bounds the calls of one caller as well.
func WithMaxCallsPerSession(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxCallsPerSession = n
		}
	}
}

// WithMaxCallsPerPrincipal bounds the tools/call in flight of one caller
// (user id and tenant) over all its sessions (default
// 64); one more is refused at once with
// AXAG_RATE_LIMITED, reason too_many_calls.
func WithMaxCallsPerPrincipal(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxCallsPerPrincipal = n
		}
	}
}

// WithMaxUpstreamTools bounds the pages and the tools of the upstream's tools/list.
//
// It allows at most pages pages (default 100) and tools
// tools (default 1000). A longer list fails the listing: New fails, an upstream session is not
// connected, a list after notifications/tools/list_changed leaves the
// session's tools refused.
func WithMaxUpstreamTools(pages, tools int) Option {
	return func(c *config) {
		if pages > 0 {
			c.maxToolPages = pages
		}
		if tools > 0 {
			c.maxTools = tools
		}
	}
}

// WithMaxPendingUpstreamRequests bounds the upstream's requests to one
// client session (elicitation, sampling, roots) that await the client's
// answer (default 4); one more is answered
// to the upstream with a JSON-RPC error.
func WithMaxPendingUpstreamRequests(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxPendingUpstream = n
		}
	}
}

// WithRelistInterval is the least time between two re-lists of an upstream session's tools.
//
// A re-list follows notifications/tools/list_changed (default
// 1s between two). Notifications that arrive meanwhile
// are coalesced into one list; the session's calls wait until it is
// checked against the pins.
func WithRelistInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.relistInterval = d
		}
	}
}

// withoutDirect turns the direct path off: every request goes through the
// SDK's server and client. The gateway benchmark and the conformance suite
// compare the two paths with it.
func withoutDirect() Option { return func(c *config) { c.sdkOnly = true } }
