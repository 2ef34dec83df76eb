package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The upstream's requests to the client: roots/list, sampling/createMessage
// and elicitation/create. The client is the agent's: its roots widen what
// the upstream may touch (server-filesystem replaces the folders it was
// started with by the client's roots), its model writes what the upstream
// asks it to (sampling), and its person is asked what the upstream wants
// in the gateway's name (elicitation). None of that is under the manifest,
// so none of it reaches the client unless the operator allows it
// (ForwardClientRoots, AllowUpstreamSampling, AllowUpstreamElicitation);
// the upstream's roots are the operator's (WithRoots). The gateway's own
// confirmation question (mcpgate's elicitation of a confirmation_required
// call) is not the upstream's and is not affected.

// Methods of the upstream's requests to the client.
const (
	methodListRoots     = "roots/list"
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
)

// clientCaps are the capabilities the link's client session offered the
// gateway, nil for the gateway's own session or when it offered none.
func (l *link) clientCaps() *mcp.ClientCapabilities {
	if l.client == nil || l.b.cfg.toolsOnly {
		return nil
	}
	if ip := l.client.InitializeParams(); ip != nil {
		return ip.Capabilities
	}
	return nil
}

// forwards reports whether the upstream's request method goes to the
// link's client session: the operator allowed it and the client offers it.
func (l *link) forwards(method string) bool {
	caps := l.clientCaps()
	if caps == nil {
		return false
	}
	switch method {
	case methodListRoots:
		return l.b.cfg.forwardClientRoots && caps.RootsV2 != nil
	case methodCreateMessage:
		return l.b.cfg.allowSampling && caps.Sampling != nil
	case methodElicit:
		return l.b.cfg.allowElicitation && caps.Elicitation != nil
	}
	return false
}

// upstreamIdentity is how the logs name the upstream: its endpoint or
// command, and the name and version it gave at initialize.
func (l *link) upstreamIdentity() []any {
	attrs := []any{}
	if l.b.up.URL != "" {
		// Without what may be a credential: user info and query.
		shown := l.b.up.URL
		if u, err := url.Parse(shown); err == nil {
			u.User, u.RawQuery, u.Fragment = nil, "", ""
			shown = u.String()
		}
		attrs = append(attrs, "upstream_url", shown)
	} else {
		attrs = append(attrs, "upstream_command", l.b.up.Command)
	}
	if cs := l.current(); cs != nil {
		if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
			attrs = append(attrs, "upstream_name", ir.ServerInfo.Name, "upstream_version", ir.ServerInfo.Version)
		}
	}
	if l.client != nil && l.client.ID() != "" {
		attrs = append(attrs, "session", l.client.ID())
	}
	return attrs
}

// askLogBurst is how many log lines of the upstream's requests to the
// client one session logs at once, then one a second: an upstream that
// sends thousands does not flood the log (each is still refused or
// bounded).
const askLogBurst = 20

// logAskLine logs one line about an upstream request, within askLogs.
func (l *link) logAskLine(level slog.Level, msg, method string) {
	if !l.askLogs.Allow() {
		return
	}
	l.b.cfg.logger.Log(context.Background(), level, msg, append([]any{"method", method}, l.upstreamIdentity()...)...)
}

// refuseAsk is the answer to an upstream request the gateway does not pass
// to its client: a JSON-RPC "method not found", which every client SDK
// raises to the server as the client not supporting it. It is logged with
// the upstream's identity.
func (l *link) refuseAsk(method string) error {
	l.logAskLine(slog.LevelWarn, "refused the upstream's request to the client: not allowed by the operator", method)
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("the gateway does not pass %s to its client", method)}
}

// logAsk logs an upstream request the gateway passes to its client.
func (l *link) logAsk(method string) {
	l.logAskLine(slog.LevelInfo, "passing the upstream's request to the client", method)
}

// receiveAsks decides the upstream's requests to the client on the SDK's
// client (the direct path decides them in upstreamRequest): the ones the
// operator did not allow are refused, the rest go on to the handlers of
// clientOptions, roots/list to the client session with
// ForwardClientRoots, and otherwise to the SDK's client, which answers with
// the operator's roots (WithRoots).
func (l *link) receiveAsks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodCreateMessage, methodElicit:
			if !l.forwards(method) {
				return nil, l.refuseAsk(method)
			}
			l.logAsk(method)
		case methodListRoots:
			if l.forwards(method) {
				l.logAsk(method)
				p, _ := req.GetParams().(*mcp.ListRootsParams)
				return askClient(ctx, l, func(ctx context.Context) (*mcp.ListRootsResult, error) { return l.client.ListRoots(ctx, p) })
			}
		}
		return next(ctx, method, req)
	}
}

// askClient asks the client session for the upstream, within
// WithMaxPendingUpstreamRequests, for no longer than the link is open.
func askClient[R any](ctx context.Context, l *link, do func(context.Context) (R, error)) (R, error) {
	var zero R
	if !l.pending.take() {
		return zero, errTooManyPending
	}
	defer l.pending.put()
	ctx, stop := l.whileOpen(ctx)
	defer stop()
	return do(ctx)
}

// operatorRoots is the answer to the upstream's roots/list when the
// client's roots are not forwarded: the operator's (WithRoots), never nil.
func (b *backend) operatorRoots() *mcp.ListRootsResult {
	roots := make([]*mcp.Root, 0, len(b.cfg.roots))
	for _, r := range b.cfg.roots {
		c := *r
		roots = append(roots, &c)
	}
	return &mcp.ListRootsResult{Roots: roots}
}

// checkRoots checks the operator's roots: file URIs of absolute paths, as
// MCP requires of a root.
func checkRoots(roots []*mcp.Root) error {
	for _, r := range roots {
		if r == nil {
			return errors.New("gateway: WithRoots: a nil root")
		}
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || u.Path == "" || !path.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" || (u.Host != "" && u.Host != "localhost") {
			return fmt.Errorf("gateway: WithRoots: %q is not a file:// URI of an absolute path", r.URI)
		}
	}
	return nil
}
