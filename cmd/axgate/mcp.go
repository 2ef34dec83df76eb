package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const mcpAbout = `
Runs an MCP gateway that enforces a manifest in front of an existing MCP
server (the upstream), whatever language it is written in. Every tools/call
runs the whole axgate chain before it reaches the upstream; tools/list shows
each caller only the manifest's tools it may call; an upstream tool the
manifest does not declare is hidden and refused (AXAG_INTENT_NOT_FOUND). A
manifest action may pin its tool's definition (upstream_sha256, written by
"axgate manifest init"): a tool that changed is refused with
AXGATE_TOOL_CHANGED.

The upstream is a streamable HTTP URL (--upstream-url) or a command the
gateway runs as a child process over stdio (--upstream-command), one child
per client session, restarted with a back-off when it dies, stopped on
shutdown. The child runs in a session of its own, and stopping it stops
every process of that session (standard input closed; SIGTERM after 5 s;
SIGKILL after 5 s more), so that a wrapper's server (npx, uvx) ends with it.
--upstream-command is split into words as a POSIX shell would
("quotes" and 'quotes', backslash escapes), but nothing is expanded and no
shell runs it: $VARIABLES and $(commands) are refused, globs and ~ are
not expanded, pipes and ; are refused. The child gets a minimal
environment: PATH and HOME of the gateway, plus each --upstream-env K=V.

Front: MCP streamable HTTP at http://LISTEN/mcp, and GET /healthz. Callers
authenticate with "Authorization: Bearer JWT" (--jwks or --jwks-url,
--issuer, --audience; claims sub, tenant, roles, scope): /mcp is an OAuth 2.0
protected resource, with its metadata (RFC 9728) at
/.well-known/oauth-protected-resource and 401 answers carrying
WWW-Authenticate: Bearer resource_metadata="…". --resource-url is the
gateway's public URL of /mcp (default http://LISTEN/mcp) and the default
--audience.

With --stdio the gateway serves one client on its standard input and output
(what desktop clients start) as the local user --local-user (with
--local-tenant, --local-roles): stdio has no authentication of its own. The
log goes to standard error.

A call that needs the person's confirmation is refused with
AXAG_CONFIRMATION_MISSING: the client is the agent's, and its answer to a
question asked inline (MCP form elicitation) could be its own, not the
person's. --trust-client-elicitation (for --stdio on the person's own
desktop; a warning at start over HTTP) asks a client that supports form
elicitation inline instead, and its answer confirms the call; approvals
never come from elicitation. --inline-confirmation is a deprecated name of
--trust-client-elicitation. The refusal says how the person makes
the token the call then carries in _meta["axag/confirmation"]: with
--signing-key KEY, "axgate token confirmation --key KEY --sub USER --intent
INTENT --args JSON" (the refusal spells it out for the call, with --aud
when the gateway's audience is not "axgate", as over HTTP); with --jwks,
the same command signed with the private key of a --jwks key; with --human,
POST /confirmations. --human ADDR serves the endpoints people
confirm and approve with (POST /confirmations, GET /approvals, POST
/approvals/{id}). They take people's tokens only: bearer JWTs of
--human-audience (required with --human, and distinct from --audience),
verified with the same keys and --issuer; an agent's token (of --audience),
or one naming both audiences, is refused with 401 AXGATE_UNAUTHENTICATED.
Keep --human reachable by people only all the same. The tokens the gateway
mints (confirmations given by elicitation, those of --human) are signed with
--signing-key, or else with a key made at start that only this process
accepts. With --stdio, tokens name the audience "axgate" unless --audience
says otherwise.

With --oidc-issuer and --oidc-client-id (--oidc-client-secret-file), --human
also serves the pages for people (docs/human-pages.md), and --human-audience
is then optional: people sign in with that OpenID Connect provider, see the
calls waiting for them and confirm, approve or deny each; a refused call
names its page (details.decision_url, under --human-url) and the same call
repeated after the decision runs once without a token.

Resources, prompts and completions reach the upstream only as the manifest
declares them (its "resources" and "prompts", each with the access fields
of an action): the lists show a caller only what it may use, a read, get,
completion or subscription passes the same gates as a read action, and
anything the manifest does not declare is refused (AXAG_INTENT_NOT_FOUND)
without reaching the upstream. A manifest that declares none serves tools
only. --tools-only is deprecated and does nothing (it was the way to get
what is now the default).

The upstream's requests to the client are the operator's to allow. Its
roots/list is answered with the folders of --root (repeatable, each given
as a file:// URI of its absolute path; none by default, and then the upstream
is not offered roots at all: @modelcontextprotocol/server-filesystem keeps
the folders it was started with); a client's roots and its
notifications/roots/list_changed never reach the upstream, unless
--forward-client-roots (logged as a warning at start: a client can then
widen what such a server reads and writes, to / if it likes). The upstream's
sampling/createMessage and elicitation/create are refused ("method not
found", logged with the upstream's name) and not offered to it, unless
--allow-upstream-sampling or --allow-upstream-elicitation: then they reach a
client that offers them, each logged, at most a few pending per session.
The gateway's own confirmation question is asked either way.

Spent confirmation and approval tokens are remembered until they expire:
with --redis, across restarts (give Redis persistence); without it, in this
process only, so every token issued before the process started is refused
(reason issued_before_start), rather than let one spent before a restart
run again: a restart voids the outstanding tokens.

--sandbox on runs each child under bubblewrap (bwrap, Linux): a PID
namespace of its own, so that its stop ends whatever it forked; only the
system's programs and libraries (/usr, /bin, /lib*, a few files of /etc),
its own program and interpreter, each --sandbox-ro PATH (read-only) and
--sandbox-rw PATH (writable) visible, with a /proc of its own, a minimal
/dev and an empty /tmp; no network unless --sandbox-network; no
capability. Where bwrap is missing or cannot start a sandbox (no user
namespaces), start fails with why; --sandbox optional then logs a warning
and runs the children unsandboxed.

SIGINT or SIGTERM stop the gateway: no new connections, calls in flight
finish (up to --shutdown-timeout), then every upstream session closes and
every child process stops. The manifest of --manifest with --upstream-* is
read once: restart the gateway to change it. SIGHUP re-reads the TLS files
and the files of --upstream-header-file and --upstream-env-file.

Several upstreams: the configuration file's upstreams: lists them, each
with a name, a url or a command (args, env, dir), its manifest (or the
actions of --manifest whose "upstream" names it), a prefix (default the name
and tool_separator, "_"), credentials, a sandbox and bounds
(docs/operating.md). Each has its own enforcer; the client sees the union of
their tools under their prefixes; /readyz reports each one. SIGHUP then also
re-reads the file and the manifests: the upstreams that did not change keep
their sessions, and a broken file keeps the configuration in use. The flags
of the one upstream (--upstream-*, --sandbox*) cannot be given beside it.

Every flag can come from a YAML file (--config; its keys are the flag names)
or an AXGATE_* variable; a flag given here wins over the file, the file over
the variable ("axgate config check FILE --command mcp" checks a file).
--tls-cert and --tls-key serve /mcp and --human over HTTPS. The admin server
(--admin) serves /metrics, /healthz and /readyz (which fails while the
--upstream-url's host or Redis is unreachable, or the upstream does
not start a session); OTLP export follows the
standard OTEL_* variables; the audit log is one JSON line per decision
(--audit; never stdout with --stdio, whose standard output is the
protocol's).`

// mcpConfig is what the flags of mcp say.
type mcpConfig struct {
	enforcerConfig
	pages                    pagesFlags // --human-url, --oidc-*: the pages of --human
	manifest                 string
	upstreamURL, upstreamCmd string
	upstreamArgs             []string // the words of upstreamCmd after the program
	upstreamEnv              envFlags
	upstreamCreds            upstreamCreds // mcpcreds.go
	listen, resourceURL      string
	stdio, toolsOnly         bool
	keepUncheckedContent     bool
	human, humanAudience     string
	inlineConfirmation       bool
	trustClientElicitation   bool
	localUser, localTenant   string
	localRoles               string
	shutdownTimeout          time.Duration

	// The upstream's requests to the client (--root,
	// --forward-client-roots, --allow-upstream-sampling,
	// --allow-upstream-elicitation).
	roots              rootFlags
	forwardClientRoots bool
	allowSampling      bool
	allowElicitation   bool

	sandbox sandboxFlags // --sandbox and its paths (sandbox.go)
}

// rootFlags collects repeated --root DIR, each made absolute.
type rootFlags []string

func (f *rootFlags) String() string { return strings.Join(*f, " ") }

func (*rootFlags) repeatable() {}

func (f *rootFlags) Set(v string) error {
	if v == "" {
		return errors.New("want a directory")
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	*f = append(*f, abs)
	return nil
}

// mcpRoots are the --root directories as MCP roots: file:// URIs. Each
// must be a directory.
func (f rootFlags) mcpRoots() ([]*mcp.Root, error) {
	var roots []*mcp.Root
	for _, dir := range f {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--root %s is not a directory", dir)
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}
		roots = append(roots, &mcp.Root{URI: u.String(), Name: filepath.Base(dir)})
	}
	return roots, nil
}

// maxInlineArgs bounds the arguments written into the command of a
// confirmation help: longer ones (a file's content) are named, not copied.
const maxInlineArgs = 200

// confirmationHelp says, for a call refused for a missing confirmation
// where the person cannot be asked inline, how a token this gateway accepts
// is made: with the --human endpoint (humanURL, when it serves), with
// "axgate token confirmation" when --signing-key names a key the person
// can sign with, by the issuer of --jwks/--jwks-url; or that none can be,
// with the ephemeral key of a gateway started without any of them. It
// names flags and files, never a key.
func (c *mcpConfig) confirmationHelp(humanURL string) func(*middleware.Call) string {
	return func(call *middleware.Call) string {
		var ways []string
		if humanURL != "" {
			ways = append(ways, fmt.Sprintf(`a person POSTs {"tool": %q, "arguments": …these arguments…} to %s/confirmations with their bearer token and passes on the token it answers`, call.Tool, humanURL))
		}
		if c.signingKey != "" {
			ways = append(ways, "the person runs `"+c.confirmationCommand(call, "SIGNING_KEY")+"`, where SIGNING_KEY is the gateway's --signing-key file (keep it out of the agent's reach)")
		}
		if c.jwks != "" || c.jwksURL != "" {
			// The same claims as a --signing-key token: without the command
			// a person who made the --jwks keys with "axgate keys gen"
			// guesses the audience (the resource URL over HTTP) and fails.
			ways = append(ways, "the issuer of the gateway's --jwks keys signs a confirmation token for these exact arguments, e.g. `"+
				c.confirmationCommand(call, "PRIVATE_KEY")+"`, where PRIVATE_KEY is the private key of a --jwks key (\"axgate keys gen\" writes it beside the JWKS)")
		}
		if len(ways) == 0 {
			return "This gateway was started without --signing-key, --human or --jwks, so no token made outside it is accepted: restart it with --signing-key KEY (\"axgate keys gen\" makes one), and the person mints one with \"axgate token confirmation --key KEY …\"."
		}
		return "To confirm: " + strings.Join(ways, "; or ") + "."
	}
}

// confirmationCommand is the "axgate token confirmation" command line that
// mints a token this gateway accepts for call, signed with the key file
// named by the placeholder key: the caller, tenant, issuer and audience the
// gateway checks, the intent and the arguments.
func (c *mcpConfig) confirmationCommand(call *middleware.Call, key string) string {
	cmd := []string{"axgate token confirmation --key " + key, "--sub " + shellQuote(call.Principal.ID)}
	if call.Principal.Tenant != "" {
		cmd = append(cmd, "--tenant "+shellQuote(call.Principal.Tenant))
	}
	if c.issuer != token.DefaultIssuer {
		cmd = append(cmd, "--iss "+shellQuote(c.issuer))
	}
	if c.audience != token.DefaultAudience {
		cmd = append(cmd, "--aud "+shellQuote(c.audience))
	}
	cmd = append(cmd, "--intent "+shellQuote(call.Intent()))
	if args := compactJSON(call.Arguments); args != "" && len(args) <= maxInlineArgs && printableASCII(args) {
		cmd = append(cmd, "--args "+shellQuote(args))
	} else {
		cmd = append(cmd, "--args-file ARGS.json (these exact arguments as JSON)")
	}
	return strings.Join(cmd, " ")
}

// shellQuote quotes s for a POSIX shell, when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:/@=+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// compactJSON is raw without insignificant white space; "" when raw is
// not JSON, "{}" when it is empty (no arguments).
func compactJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// printableASCII reports whether s is only printable ASCII: what a command
// a person pastes may carry without hiding anything (no control or
// bidirectional characters).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// envFlags collects repeated K=V flags.
type envFlags []string

func (f *envFlags) String() string { return strings.Join(*f, " ") }

// repeatable lets a configuration file give a list (config.go).
func (*envFlags) repeatable() {}

func (f *envFlags) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
		return errors.New(`want NAME=VALUE, e.g. "LOG_LEVEL=debug"`)
	}
	*f = append(*f, v)
	return nil
}

// mcpFlags returns the flag set of mcp and the values it fills in.
func mcpFlags(e *env) (*flag.FlagSet, *mcpConfig, *opsFlags) {
	fs := newFlags(e, "mcp", `mcp --manifest M (--upstream-url URL | --upstream-command "CMD ARGS…") [--listen ADDR | --stdio] [flags]`, mcpAbout)
	var c mcpConfig
	fs.StringVar(&c.manifest, "manifest", "", "the manifest to enforce (JSON or YAML)")
	fs.StringVar(&c.upstreamURL, "upstream-url", "", "the upstream's streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp")
	fs.StringVar(&c.upstreamCmd, "upstream-command", "", `the upstream's command line, run as a child over stdio, e.g. "node server.js /srv/files" (split into words, never run by a shell)`)
	fs.Var(&c.upstreamEnv, "upstream-env", "add NAME=VALUE to the child's environment, which otherwise holds only PATH and HOME (repeatable)")
	c.upstreamCreds.register(fs)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0 picks a free one; the log says which)")
	fs.BoolVar(&c.stdio, "stdio", false, "serve one client on standard input and output, as the local user, instead of listening")
	fs.StringVar(&c.resourceURL, "resource-url", "", "the gateway's public URL of /mcp, for the protected resource metadata (default http(s)://LISTEN/mcp)")
	fs.BoolVar(&c.toolsOnly, "tools-only", false, "deprecated, does nothing: what the manifest does not declare is refused by default")
	fs.BoolVar(&c.keepUncheckedContent, "keep-unchecked-content", false, "pass an upstream result's content blocks on as they are, also where an output_schema or postconditions checked only its structuredContent")
	fs.StringVar(&c.human, "human", "", "address of the endpoints people confirm and approve with (needs --human-audience, and --jwks or --jwks-url); off by default")
	fs.StringVar(&c.humanAudience, "human-audience", "", "with --human: the required aud of the tokens people bring there, distinct from --audience (the agents' tokens are refused there)")
	fs.BoolVar(&c.trustClientElicitation, "trust-client-elicitation", false, "ask the person inline (MCP form elicitation) and take the client's answer as theirs: only where the client is the person's own app (--stdio on a desktop); off by default")
	fs.BoolVar(&c.inlineConfirmation, "inline-confirmation", false, "deprecated: --trust-client-elicitation")
	fs.StringVar(&c.localUser, "local-user", "", "with --stdio: the local user the calls are made for (required)")
	fs.StringVar(&c.localTenant, "local-tenant", "", "with --stdio: the local user's tenant")
	fs.StringVar(&c.localRoles, "local-roles", "", "with --stdio: the local user's roles, comma-separated")
	fs.Var(&c.roots, "root", "a folder (`DIR`) the upstream is given as its root (MCP roots, a file:// URI of the absolute path), in place of any root of the client (repeatable; default none, and the upstream is not offered roots)")
	fs.BoolVar(&c.forwardClientRoots, "forward-client-roots", false, "give the upstream the client's roots (and its roots/list_changed), as before: a client can then widen what the upstream reads and writes, e.g. to /")
	fs.BoolVar(&c.allowSampling, "allow-upstream-sampling", false, "pass the upstream's sampling/createMessage to a client that offers sampling (refused by default)")
	fs.BoolVar(&c.allowElicitation, "allow-upstream-elicitation", false, "pass the upstream's elicitation/create to a client that offers elicitation (refused by default; the gateway's own confirmation question is not affected)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long calls in flight may finish on shutdown")
	c.register(fs, "", "required aud of every token (default: --resource-url)")
	c.sandbox.register(fs)
	c.pages.register(fs, false)
	ops := addOpsFlags(fs)
	return fs, &c, ops
}

func runMCP(ctx context.Context, e *env, args []string) int {
	fs, cp, ops := mcpFlags(e)
	pos, conf, status, ok := parseConfigured(e, fs, args)
	if !ok {
		return status
	}
	c := *cp
	// given says whether the command line or the file sets a flag: an
	// AXGATE_* variable is a default of the environment, which --stdio
	// may ignore (AXGATE_LISTEN set for every replica).
	given := func(name string) bool { return conf.sources[name] == sourceFlag || conf.sources[name] == sourceFile }
	// With the configuration file's upstreams: (upstreams.go), the flags
	// of the one upstream have no upstream to configure.
	multi := conf.file != nil && conf.file.upstreamsGiven
	if flags := upstreamFlagsWithUpstreams(conf); multi && len(flags) > 0 {
		return usageError(e, fs, "%s configure the one upstream of the flags, but the configuration file lists its upstreams (upstreams:): give each one's url or command, credentials and sandbox in its entry, or drop upstreams: to use the flags", strings.Join(flags, ", "))
	}
	switch {
	case len(pos) > 0:
		return usageError(e, fs, "unexpected argument %q", pos[0])
	case !multi && c.manifest == "":
		return usageError(e, fs, "--manifest is required (or a configuration file with upstreams:)")
	case !multi && c.upstreamURL == "" && c.upstreamCmd == "":
		return usageError(e, fs, "give the upstream: --upstream-url or --upstream-command")
	case c.upstreamURL != "" && c.upstreamCmd != "":
		return usageError(e, fs, "give --upstream-url or --upstream-command, not both")
	case c.upstreamURL != "" && len(c.upstreamEnv) > 0:
		return usageError(e, fs, "--upstream-env is for --upstream-command")
	case c.checkKeys(!c.stdio) != "":
		return usageError(e, fs, "%s", c.checkKeys(!c.stdio))
	case c.stdio && c.localUser == "":
		return usageError(e, fs, "--stdio serves the local user: give --local-user")
	case !c.stdio && (c.localUser != "" || c.localTenant != "" || c.localRoles != ""):
		return usageError(e, fs, "--local-user, --local-tenant and --local-roles are for --stdio; over HTTP the caller is the bearer token's")
	case c.stdio && (given("listen") || c.resourceURL != ""):
		return usageError(e, fs, "--stdio listens nowhere: no --listen or --resource-url")
	case c.stdio && ops.audit == "stdout":
		return usageError(e, fs, "--stdio speaks the protocol on standard output: the audit cannot go there (--audit stderr, file:PATH, otlp or off)")
	case c.stdio && ops.tlsCert != "" && c.human == "":
		return usageError(e, fs, "--stdio listens nowhere: --tls-cert and --tls-key apply to --human only")
	case c.stdio && c.anonymous:
		return usageError(e, fs, "--anonymous is for HTTP; --stdio serves the local user")
	case c.sandbox.check(c.upstreamCmd != "") != "":
		return usageError(e, fs, "%s", c.sandbox.check(c.upstreamCmd != ""))
	case len(c.roots) > 0 && c.forwardClientRoots:
		return usageError(e, fs, "--root and --forward-client-roots contradict each other: the upstream's roots are the operator's or the client's")
	case c.pages.check(c.human) != "":
		return usageError(e, fs, "%s", c.pages.check(c.human))
	case c.human != "" && c.jwks == "" && c.jwksURL == "" && c.pages.oidcIssuer == "":
		return usageError(e, fs, "--human needs --jwks or --jwks-url: the people who confirm and approve must be authenticated")
	case c.human != "" && c.humanAudience == "" && c.pages.oidcIssuer == "":
		return usageError(e, fs, "--human needs --human-audience: the endpoints that mint confirmations and approvals take people's tokens only, of an audience of their own, distinct from --audience (the agents')")
	case c.human == "" && c.humanAudience != "":
		return usageError(e, fs, "--human-audience is the audience of the tokens --human takes: give --human too")
	case c.humanAudience != "" && c.humanAudience == c.agentsAudience():
		return usageError(e, fs, "--human-audience and --audience (by default --resource-url, or %q with --stdio) are both %q: an agent's token would then mint confirmations and approvals at --human; give people's tokens an audience of their own",
			token.DefaultAudience, c.humanAudience)
	}
	if c.upstreamURL != "" {
		if !isHTTPURL(c.upstreamURL) {
			return usageError(e, fs, "--upstream-url must be an http or https URL, not %q", redactURL(c.upstreamURL))
		}
	}
	if c.upstreamCmd != "" {
		words, err := splitCommand(c.upstreamCmd)
		if err != nil {
			return usageError(e, fs, "--upstream-command: %v", err)
		}
		c.upstreamCmd, c.upstreamArgs = words[0], words[1:]
		if err := commandFlag("upstream-command", c.upstreamCmd); err != nil {
			return fileError(e, "mcp", err)
		}
	}
	if err := c.checkFiles(c.manifest); err != nil {
		return fileError(e, "mcp", err)
	}
	if c.resourceURL != "" {
		if !isHTTPURL(c.resourceURL) {
			return usageError(e, fs, "--resource-url must be an http or https URL, not %q", c.resourceURL)
		}
	}
	return serveMCP(ctx, e, c, ops, conf)
}

// askOptions adds the gateway's options of the upstream's requests to the
// client: the operator's roots, the client's, sampling and elicitation.
func (c mcpConfig) askOptions(gopts []mcpgw.Option) ([]mcpgw.Option, error) {
	roots, err := c.roots.mcpRoots()
	if err != nil {
		return nil, err
	}
	if len(roots) > 0 {
		gopts = append(gopts, mcpgw.WithRoots(roots...))
	}
	if c.forwardClientRoots {
		gopts = append(gopts, mcpgw.ForwardClientRoots())
	}
	if c.allowSampling {
		gopts = append(gopts, mcpgw.AllowUpstreamSampling())
	}
	if c.allowElicitation {
		gopts = append(gopts, mcpgw.AllowUpstreamElicitation())
	}
	return gopts, nil
}

// shellExpansion matches what a shell would expand in a word: a variable,
// a command substitution.
var shellExpansion = regexp.MustCompile("\\$[A-Za-z_{(]|`")

// splitCommand splits a command line into words as a POSIX shell would,
// without expanding anything: what a shell would expand (an environment
// variable, a command substitution) and shell operators are refused rather
// than passed on as text the user did not mean.
func splitCommand(line string) ([]string, error) {
	p := shellwords.NewParser() // ParseEnv and ParseBacktick stay off
	words, err := p.Parse(line)
	if err != nil {
		return nil, err
	}
	if p.Position >= 0 {
		return nil, fmt.Errorf("%q holds a shell operator (;, &, |, <, >); no shell runs the command: give the program and its arguments", line)
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	for _, w := range words {
		if shellExpansion.MatchString(w) {
			return nil, fmt.Errorf("%q looks like a shell expansion ($VAR, ${…}, $(…), `…`); no shell runs the command, so it would reach the program as it is: expand it yourself", w)
		}
	}
	return words, nil
}

// serveMCP runs the gateway until ctx is done (or, with --stdio, the client
// goes away).
func serveMCP(ctx context.Context, e *env, c mcpConfig, ops *opsFlags, conf configured) int {
	stderr := &syncWriter{w: e.stderr}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	multi := conf.file != nil && conf.file.upstreamsGiven
	var m *manifest.Manifest
	if !multi {
		var err error
		if m, err = manifest.LoadFile(c.manifest); err != nil {
			return failf(e, "mcp", "%v", err)
		}
	}
	// The audit (--audit stderr) shares standard error with the log and
	// the child's stderr: one writer, so that lines never interleave.
	oe := *e
	oe.stderr = stderr
	rt, err := startOps(ctx, &oe, ops, conf, log)
	if err != nil {
		return failf(e, "mcp", "%v", err)
	}
	defer rt.close()

	// Listen first: with port 0, the resource URL (and so the default
	// audience) names the port the system picked.
	var ln, humanLn net.Listener
	if !c.stdio {
		if ln, err = net.Listen("tcp", c.listen); err != nil {
			return failf(e, "mcp", "%v", err)
		}
		defer ln.Close()
		if c.resourceURL == "" {
			c.resourceURL = rt.scheme() + "://" + ln.Addr().String() + "/mcp"
		}
	}
	if c.human != "" {
		if humanLn, err = net.Listen("tcp", c.human); err != nil {
			return failf(e, "mcp", "--human: %v", err)
		}
		defer humanLn.Close()
		if c.pages.oidcIssuer != "" {
			// Before the notifier is made: its links lead to the pages.
			rt.humanBase = c.pages.baseURL(rt.scheme(), humanLn.Addr().String())
		}
	}
	if c.audience == "" {
		c.audience = c.resourceURL
		if c.stdio {
			// No resource URL: the tokens of a stdio gateway (the
			// confirmations it mints, those a person brings) name the
			// default audience.
			c.audience = token.DefaultAudience
		}
	}

	if c.humanAudience != "" && c.humanAudience == c.audience {
		// --audience by default: the resource URL, or the default
		// audience with --stdio.
		fmt.Fprintf(e.stderr, "axgate mcp: --human-audience is %q, which is also --audience (by default the resource URL, or %q with --stdio): an agent's token would then mint confirmations and approvals at --human; give people's tokens an audience of their own\n", c.audience, token.DefaultAudience)
		fmt.Fprintf(e.stderr, "Run \"axgate help mcp\" for usage.\n")
		return exitUsage
	}

	shared, err := openEnforcerState(ctx, c.enforcerConfig, "mcp", true, log)
	if err != nil {
		return failf(e, "mcp", "%v", err)
	}
	defer shared.close()
	if c.signingKey == "" && c.redis != "" {
		log.Warn("axgate mcp: no --signing-key: the tokens this gateway mints (confirmations, approvals of --human) and the request state of its input_required answers (MCP 2026-07-28) are signed with a key of this process, which other replicas do not accept")
	}
	keys, err := shared.keys()
	if err != nil {
		return failf(e, "mcp", "%v", err)
	}
	// newEnforcer builds the enforcer of m, one of the manifests whose
	// union is union (the same for a gateway of one upstream), sharing the
	// process's state and keys with every other.
	newEnforcer := func(m, union *manifest.Manifest) (*axgate.Enforcer, error) {
		opts, err := shared.options(keys)
		if err != nil {
			return nil, err
		}
		// After shared's WithLogger: the audit goes where --audit says.
		// The configuration's enforce: and notify: sections, checked
		// against the manifests.
		ropts, err := rt.enforcerOptionsIn(m, union)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ropts...)
		if humanLn != nil && c.pages.oidcIssuer != "" {
			// People sign in to the pages: refusals name each call's page.
			opts = append(opts, axgate.WithDecisionPages(rt.humanBase))
		}
		return axgate.New(m, opts...)
	}
	var enf *axgate.Enforcer
	if !multi {
		if enf, err = newEnforcer(m, m); err != nil {
			return failf(e, "mcp", "%s", startError(err))
		}
		defer enf.Close()
	}

	var (
		bearer httpgate.PrincipalFunc
		people httpgate.HumanPrincipalFunc
	)
	if keys != nil {
		if bearer, err = httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(keys), Issuer: c.issuer, Audience: c.audience}); err != nil {
			return failf(e, "mcp", "%v", err)
		}
	}
	if humanLn != nil && c.humanAudience != "" {
		// Tokens of the people's own audience only: an agent's token
		// (--audience) would confirm and approve its own calls.
		people, err = httpgate.HumanBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(keys), Issuer: c.issuer, Audience: c.humanAudience}, c.audience)
		if err != nil {
			return failf(e, "mcp", "--human: %v", err)
		}
	}
	gopts := []mcpgw.Option{mcpgw.WithLogger(log)}
	if tc, ok := rt.telemetry.config(); ok && tc.MeterProvider != nil {
		// The gateway's own metrics (upstream restarts, tools changed)
		// on /metrics and in the OTLP export, with the enforcer's.
		gopts = append(gopts, mcpgw.WithMeterProvider(tc.MeterProvider))
	}
	switch {
	case c.stdio:
		gopts = append(gopts, mcpgw.WithLocalPrincipal(c.localPrincipal()))
	case c.anonymous:
		gopts = append(gopts, mcpgw.WithPrincipal(mcpgate.StaticPrincipal(middleware.Principal{})))
	default:
		gopts = append(gopts, mcpgw.WithBearer(bearer, &oauthex.ProtectedResourceMetadata{
			Resource:               c.resourceURL,
			BearerMethodsSupported: []string{"header"},
		}))
	}
	if c.toolsOnly {
		// What it asked for is the default now: a no-op kept so that
		// existing command lines keep starting.
		log.Warn("--tools-only is deprecated and does nothing: what the manifest does not declare (resources, prompts, completions) and the upstream's requests to the client are refused by default; remove the flag")
	}
	if c.keepUncheckedContent {
		gopts = append(gopts, mcpgw.KeepUncheckedContent())
	}
	if c.inlineConfirmation {
		log.Warn("--inline-confirmation is deprecated: it is --trust-client-elicitation now; rename the flag")
	}
	if c.trustClientElicitation || c.inlineConfirmation {
		// The operator's word that the client is the person's own app:
		// its answer to the question asked inline counts as theirs.
		gopts = append(gopts, mcpgw.WithTrustClientElicitation())
		if !c.stdio {
			log.Warn("axgate mcp: --trust-client-elicitation over HTTP: a client's answer to the confirmation question counts as the person's, and a client (or a program behind it) can answer accept by itself; use it only where every client is the person's own app")
		}
	}
	if gopts, err = c.askOptions(gopts); err != nil {
		return failf(e, "mcp", "%v", err)
	}
	gopts = c.sandbox.option(gopts)
	humanURL := ""
	if humanLn != nil {
		humanURL = rt.scheme() + "://" + humanLn.Addr().String()
	}
	// The request state of a question or a decision page (MCP 2026-07-28's
	// input_required) is taken once in the shared replay store, and with
	// --signing-key signed with a key derived from it: another replica
	// given the same key accepts the retry.
	mcpOpts := []mcpgate.Option{mcpgate.WithConfirmationHelp(c.confirmationHelp(humanURL)), mcpgate.WithElicitationReplayStore(shared.state.replay)}
	if c.signingKey != "" {
		key, err := elicitationKey(c.signingKey)
		if err != nil {
			return failf(e, "mcp", "%v", err)
		}
		mcpOpts = append(mcpOpts, mcpgate.WithElicitationKey(key))
	}
	gopts = append(gopts, mcpgw.WithMCPOptions(mcpOpts...))
	// human is the handler of --human over enf.
	human := func(enf *axgate.Enforcer) (http.Handler, error) {
		popts, err := c.pages.options(rt.humanBase, c.signingKey)
		if err != nil {
			return nil, err
		}
		return mount(httpgate.NewHumanHandler(enf, people, append(popts, httpgate.WithLogger(log))...), rt.humanBase), nil
	}
	var (
		gw           *mcpgw.Gateway
		humanHandler http.Handler
		reload       = func(context.Context) {}
		upstreamName string
		toolCount    int
	)
	if multi {
		mu := &multiUpstreams{log: log, cfgPath: conf.file.path, manifest: c.manifest, stderr: stderr,
			fresh:    func() *flag.FlagSet { fs, _, _ := mcpFlags(e); return fs },
			childEnv: func(u upstreamConfig) []string { return c.childEnvOf(e.getenv, u.env) },
			enforcer: newEnforcer}
		if humanLn != nil {
			// Built anew with each generation's enforcers (a reload).
			mu.human = human
			humanHandler = mu
		}
		if err := mu.start(conf.file, gopts); err != nil {
			return failf(e, "mcp", "%v%s", err, sandboxAdvice(err))
		}
		defer mu.close()
		gw, reload, upstreamName = mu.gw, mu.reload, mu.summary
		rt.upstreams = gw.Upstreams
		if err := rt.serveAdmin(mu.ready(shared)); err != nil {
			gw.Close()
			return failf(e, "mcp", "%v", err)
		}
	} else {
		up := mcpgw.Upstream{URL: c.upstreamURL}
		if c.upstreamCmd != "" {
			up = mcpgw.Upstream{Command: c.upstreamCmd, Args: c.upstreamArgs, Env: c.childEnv(e.getenv), Stderr: stderr}
		}
		if up.Credentials, err = c.upstreamCreds.build(); err != nil {
			return failf(e, "mcp", "%v", err)
		}
		if gw, err = mcpgw.New(enf, up, gopts...); err != nil {
			return failf(e, "mcp", "%v%s", err, c.sandbox.advice(err))
		}
		if humanLn != nil {
			if humanHandler, err = human(enf); err != nil {
				gw.Close()
				return failf(e, "mcp", "%v", err)
			}
		}
		if err := rt.serveAdmin(c.ready(shared, gw)); err != nil {
			gw.Close()
			return failf(e, "mcp", "%v", err)
		}
		upstreamName = redactURL(c.upstreamURL)
		if upstreamName == "" {
			upstreamName = strings.Join(append([]string{c.upstreamCmd}, c.upstreamArgs...), " ")
		}
		toolCount = len(m.Actions)
	}
	// Stops every upstream session and child process, after the servers
	// below have stopped.
	defer gw.Close()

	// SIGHUP re-reads the TLS files, and with upstreams: the configuration
	// file and the manifests (the manifest of --upstream-* is read once).
	signals := e.signals
	if signals == nil {
		signals = notify
	}
	hup, stopHUP := signals(syscall.SIGHUP)
	defer stopHUP()
	hupDone := make(chan struct{})
	defer close(hupDone)
	go func() {
		for {
			select {
			case <-hup:
				rt.reload()
				reload(ctx)
				// The credentials' files (API keys) of every upstream,
				// for the requests and children from now on.
				if err := gw.ReloadCredentials(); err != nil {
					log.Error("axgate mcp: reading the upstream credentials' files again failed; keeping the values read before", "err", err)
				}
			case <-hupDone:
				return
			}
		}
	}()

	var humanSrv *http.Server
	served := make(chan error, 2)
	if humanLn != nil {
		humanSrv = newServer(humanHandler, serveConfig{}, log)
		go func() { served <- fmt.Errorf("--human: %w", rt.serve(humanSrv, humanLn)) }()
		log.Info("axgate mcp: people confirm and approve at", "addr", rt.scheme()+"://"+humanLn.Addr().String(), "audience", c.humanAudience)
	}

	if c.stdio {
		shared.logNotes("mcp")
		log.Info("axgate mcp: serving on stdio", "manifest", c.manifest, "tools", toolCount, "upstream", upstreamName, "user", c.localUser)
		err := gw.ServeStdio(ctx)
		shutdown(log, c.shutdownTimeout, humanSrv)
		gw.Close()
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return failf(e, "mcp", "%v", err)
		}
		log.Info("axgate mcp: stopped")
		return exitOK
	}

	calls := &inFlight{h: gw.Handler()}
	srv := newServer(calls, serveConfig{upstreamTimeout: mcpgw.DefaultConnectTimeout}, log)
	// Streamable HTTP answers may stream for as long as a session lives:
	// no write timeout (the session timeout bounds idle sessions).
	srv.WriteTimeout = 0
	mcpServed := make(chan error, 1)
	go func() { mcpServed <- rt.serve(srv, ln) }()
	shared.logNotes("mcp")
	log.Info("axgate mcp: listening", "addr", rt.scheme()+"://"+ln.Addr().String()+"/mcp", "resource", c.resourceURL,
		"manifest", c.manifest, "tools", toolCount, "upstream", upstreamName)
	select {
	case err := <-mcpServed:
		shutdown(log, c.shutdownTimeout, humanSrv)
		return failf(e, "mcp", "%v", err)
	case err := <-served:
		shutdown(log, c.shutdownTimeout, srv, humanSrv)
		return failf(e, "mcp", "%v", err)
	case <-ctx.Done():
	}
	log.Info("axgate mcp: shutting down", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown(sctx) }()
	// Shutdown closes the listener first (Serve returns then): no new
	// connection. A session's GET stream stays open as long as the session
	// lives, so Shutdown alone would wait for the timeout whenever a client
	// is connected: wait for the calls in flight only (every request but a
	// GET), then close the sessions, which ends their streams.
	<-mcpServed
	select {
	case <-calls.idle():
	case <-sctx.Done():
		log.Warn("axgate mcp: calls still in flight after the shutdown timeout; closing")
	}
	gw.Close() // every client and upstream session, every child process
	if err := <-stopped; err != nil {
		srv.Close()
	}
	shutdown(log, c.shutdownTimeout, humanSrv)
	log.Info("axgate mcp: stopped")
	return exitOK
}

// inFlight counts the requests in flight that are calls: every request
// but a GET, which is a session's stream of server messages.
type inFlight struct {
	h     http.Handler
	mu    sync.Mutex
	n     int
	ended chan struct{} // closed when n drops to 0; nil when nobody waits
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		f.h.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.n--
		if f.n == 0 && f.ended != nil {
			close(f.ended)
			f.ended = nil
		}
		f.mu.Unlock()
	}()
	f.h.ServeHTTP(w, r)
}

// idle is closed once no call is in flight.
func (f *inFlight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if f.ended == nil {
		f.ended = make(chan struct{})
	}
	return f.ended
}

// shutdown stops the servers gracefully, each within timeout; a server that
// has not finished by then is closed.
func shutdown(log *slog.Logger, timeout time.Duration, servers ...*http.Server) {
	for _, s := range servers {
		if s == nil {
			continue
		}
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := s.Shutdown(sctx); err != nil {
			log.Warn("axgate mcp: calls still in flight after the shutdown timeout; closing", "err", err)
			s.Close()
		}
		cancel()
	}
}

// agentsAudience is the audience of the agents' tokens as the flags say it:
// --audience, or by default --resource-url (which, when not given either,
// names the port listened on: known once listening), or with --stdio
// token.DefaultAudience.
func (c mcpConfig) agentsAudience() string {
	switch {
	case c.audience != "":
		return c.audience
	case c.stdio:
		return token.DefaultAudience
	}
	return c.resourceURL
}

// localPrincipal is the caller of a --stdio gateway.
func (c mcpConfig) localPrincipal() middleware.Principal {
	p := middleware.Principal{ID: c.localUser, Tenant: c.localTenant}
	for _, r := range strings.Split(c.localRoles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			p.Roles = append(p.Roles, r)
		}
	}
	return p
}

// childEnv is the environment of an upstream child: PATH and HOME of the
// gateway (so that the program and its own files are found), and the
// --upstream-env pairs, never the rest of the gateway's environment (its
// secrets: cloud credentials, the Redis URL, tokens).
func (c mcpConfig) childEnv(getenv func(string) string) []string {
	return c.childEnvOf(getenv, c.upstreamEnv)
}

// childEnvOf is childEnv with the pairs env (an upstreams: entry's).
func (c mcpConfig) childEnvOf(getenv func(string) string, env []string) []string {
	out := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v := getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return append(out, env...)
}

// ready returns the readiness check of /readyz: the upstream starts a
// session and lists its tools (gateway.Ready: at an --upstream-url, or with
// a child of an --upstream-command), its host takes a TCP connection (an
// --upstream-url), and Redis answers a PING (with --redis).
func (c mcpConfig) ready(shared *enforcerState, gw *mcpgw.Gateway) func(context.Context) []error {
	var up *url.URL
	if c.upstreamURL != "" {
		up, _ = url.Parse(c.upstreamURL) // checked by runMCP
	}
	return func(ctx context.Context) []error {
		errs := checkReady(ctx, up, shared)
		if err := gw.Ready(ctx); err != nil {
			errs = append(errs, err)
		}
		return errs
	}
}
