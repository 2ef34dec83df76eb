package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/upcreds"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
)

// UpstreamCredentials are the gateway's own credentials to its upstream,
// set on Upstream.Credentials. The caller's own credentials never reach the
// upstream: the gateway strips them, and an Authorization header these do
// not set is removed. None of the values is logged.
type UpstreamCredentials struct {
	// HeaderFiles are HTTP headers (name: the path of a file holding the
	// value, such as an API key) set on every request to an HTTP
	// upstream. A file's trailing line ends are dropped; it must hold one
	// line. Read by New and again by (*Gateway).ReloadCredentials.
	HeaderFiles map[string]string
	// EnvFiles are environment variables (name: the path of a file holding
	// the value) given to a command upstream's child, read as HeaderFiles
	// are; a child started after ReloadCredentials gets the new values.
	EnvFiles map[string]string
	// ClientCredentials is the OAuth 2.0 client credentials grant of the
	// gateway's own token to an HTTP upstream, cached and renewed before it
	// expires. With TokenExchange it is the token of the requests that
	// have no caller: the gateway's own session (the pins at start,
	// /healthz).
	ClientCredentials *clientcredentials.Config
	// TokenExchange obtains, for each caller, a token of the upstream's
	// audience by RFC 8693 token exchange of the caller's bearer token.
	TokenExchange *TokenExchange
}

// TokenExchange configures the RFC 8693 token exchange of each caller's token.
//
// The caller's bearer token (the one the gateway verified, WithBearer) is
// exchanged for a token of the upstream's audience: the gateway
// authenticates at TokenURL as ClientID with ClientSecret (HTTP Basic),
// sends the caller's token as the subject token (an access token) and asks
// for an access token of Audience (and Resource, if set), with Scopes.
//
// Each caller's token (by tenant and user) is kept until it expires (a
// minute when the endpoint gives no expiry), never past the expiry (exp)
// of the caller's own token, for at most MaxCallers callers (default
// 10000; the least recently used goes first). A caller whose exchange fails
// is refused and nothing of it reaches the upstream
// (AXGATE_STORE_UNAVAILABLE, reason upstream_credentials). Requests without
// a caller (the gateway's own session) use ClientCredentials, or no token.
type TokenExchange struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Audience     string
	Resource     string
	Scopes       []string
	MaxCallers   int
}

// ReloadCredentials reads the files of the upstream's HeaderFiles and
// EnvFiles again. On an error the values read before stay in use, and the
// error names the file (never its content).
func (g *Gateway) ReloadCredentials() error {
	var errs []error
	for _, b := range g.set().list {
		if b.creds != nil {
			errs = append(errs, b.creds.Reload())
		}
	}
	return errors.Join(errs...)
}

// newCredentials makes the Set of up's credentials, or nil without any.
func newCredentials(up Upstream) (*upcreds.Set, error) {
	c := up.Credentials
	if c == nil {
		return nil, nil
	}
	if up.Command != "" && (len(c.HeaderFiles) > 0 || c.ClientCredentials != nil || c.TokenExchange != nil) {
		return nil, errors.New("gateway: a command upstream takes only EnvFiles of the upstream credentials")
	}
	if up.URL != "" && len(c.EnvFiles) > 0 {
		return nil, errors.New("gateway: an HTTP upstream takes no EnvFiles; give HeaderFiles")
	}
	cfg := upcreds.Config{HeaderFiles: c.HeaderFiles, EnvFiles: c.EnvFiles, ClientCredentials: c.ClientCredentials}
	if te := c.TokenExchange; te != nil {
		cfg.Exchange = &upcreds.Exchange{TokenURL: te.TokenURL, ClientID: te.ClientID, ClientSecret: te.ClientSecret,
			Audience: te.Audience, Resource: te.Resource, Scopes: te.Scopes, MaxCallers: te.MaxCallers}
	}
	s, err := upcreds.New(cfg)
	if err != nil {
		return nil, errors.New("gateway: " + err.Error())
	}
	return s, nil
}

// withCredentials wraps hc's transport with the credentials.
func withCredentials(hc *http.Client, s *upcreds.Set) *http.Client {
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = s.Transport(next)
	return &c
}

// callerOf is the caller of a request the gateway authenticated: its key
// (tenant and user) and the bearer token it verified; nil when there is
// no verified token (a stdio caller).
func callerOf(f *front, ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra) *upcreds.Caller {
	if extra == nil || extra.TokenInfo == nil || extra.Header == nil {
		return nil
	}
	tok, ok := bearerToken(extra.Header.Get("Authorization"))
	if !ok {
		return nil
	}
	p, err := f.principalOf(ctx, ss, extra)
	if err != nil || p.ID == "" {
		return nil
	}
	return &upcreds.Caller{Key: sessionKey(p), Token: tok, Expires: claimTime(p.Claims["exp"])}
}

// claimTime is a NumericDate claim (exp) as a time, or zero.
func claimTime(v any) time.Time {
	var secs float64
	switch n := v.(type) {
	case float64:
		secs = n
	case int64:
		secs = float64(n)
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return time.Time{}
		}
		secs = f
	default:
		return time.Time{}
	}
	if secs <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(secs), 0)
}

// bearerToken is the token of an Authorization header of the Bearer scheme.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// perCaller reports whether the upstream's requests carry a token per
// caller (TokenExchange).
func (b *backend) perCaller() bool { return b.creds.PerCaller() }

// withCaller puts the call's caller on ctx, for the upstream requests,
// and keeps it as the upstream session's.
func (f *front) withCaller(ctx context.Context, l *link, req *mcp.CallToolRequest) context.Context {
	c := callerOf(f, ctx, req.Session, req.Extra)
	if c == nil {
		return ctx
	}
	l.caller.Store(c)
	return upcreds.WithCaller(ctx, c)
}

// upstreamCredential obtains the caller's token for the upstream now
// (kept for the requests), so that a call whose credential cannot be had
// is refused, by the chain, before anything is sent. The transport
// refuses to send such a request either way.
func (b *backend) upstreamCredential(ctx context.Context) error {
	if !b.perCaller() || upcreds.CallerFrom(ctx) == nil {
		return nil
	}
	_, err := b.creds.Authorization(ctx)
	return err
}

// credentialsRefused is the refusal of a call whose upstream credential
// could not be had.
func credentialsRefused(intent string, err error) *axerr.Error {
	msg := "the gateway could not obtain a credential for the upstream MCP server"
	var ce *upcreds.Error
	refused := errors.As(err, &ce) && ce.Refused
	if refused {
		if ce.Exchange {
			msg += ": the token endpoint refused to exchange this caller's token for one of the upstream"
		} else {
			msg += ": the token endpoint refused the gateway's client credentials"
		}
		if ce.Code != "" {
			msg += " (" + ce.Code + ")"
		}
	}
	e := axerr.New(axerr.CodeStoreUnavailable, msg).
		WithIntent(intent).WithReason(reasons.UpstreamCredentials).WithCause(err)
	if refused {
		return e.WithRetryable(false).
			WithSuggestion("Ask the operator whether this caller may use the upstream; calling again will not help.")
	}
	return e.WithRetryable(true)
}

// linkCaller gives the requests of l's upstream session that carry no
// caller (its initialize, lists, event stream) the caller last seen on
// the client session: the upstream session is that caller's.
type linkCaller struct {
	l    *link
	next http.RoundTripper
}

func (t linkCaller) RoundTrip(r *http.Request) (*http.Response, error) {
	if upcreds.CallerFrom(r.Context()) == nil {
		if c := t.l.caller.Load(); c != nil {
			r = r.WithContext(upcreds.WithCaller(r.Context(), c))
		}
	}
	return t.next.RoundTrip(r)
}
