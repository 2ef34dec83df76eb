package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// Keys of a tools/call request's _meta that carry credentials.
const (
	MetaConfirmation   = "axag/confirmation"
	MetaApprovals      = "axag/approvals"
	MetaIdempotencyKey = "axag/idempotency_key"
	MetaTenant         = "axag/tenant"
)

// Headers of the streamable HTTP transport that carry credentials, as in
// adapters/httpgate. _meta wins over a header.
const (
	HeaderConfirmation   = "X-AXAG-Confirmation"
	HeaderApproval       = "X-AXAG-Approval"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTenant         = "X-AXAG-Tenant"
)

// Claims of TokenInfo.Extra that TokenInfoPrincipal reads.
const (
	ClaimTenant = "tenant"
	ClaimRoles  = "roles"
)

var knownMeta = map[string]bool{MetaConfirmation: true, MetaApprovals: true, MetaIdempotencyKey: true, MetaTenant: true}

var errNoTokenInfo = errors.New("the request carries no verified bearer token")

// TokenInfoPrincipal is the default PrincipalFunc: the bearer token the
// transport verified (the SDK's auth.RequireBearerToken puts it on the
// request). A request without one is refused with AXGATE_UNAUTHENTICATED.
func TokenInfoPrincipal(_ context.Context, req *mcp.CallToolRequest) (middleware.Principal, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return middleware.Principal{}, errNoTokenInfo
	}
	return PrincipalFromTokenInfo(req.Extra.TokenInfo), nil
}

// PrincipalFromTokenInfo maps a verified bearer token to a principal. A
// token verified by BearerVerifier carries the principal its authenticator
// found. Otherwise ID is the token's user, Scopes its scopes, Claims its
// extra claims, Tenant the "tenant" claim and Roles the "roles" claim (a
// list, or a space-separated string).
func PrincipalFromTokenInfo(ti *auth.TokenInfo) middleware.Principal {
	if p, ok := ti.Extra[extraPrincipal].(middleware.Principal); ok {
		return p
	}
	p := middleware.Principal{ID: ti.UserID, Scopes: ti.Scopes, Claims: ti.Extra}
	if t, ok := ti.Extra[ClaimTenant].(string); ok {
		p.Tenant = t
	}
	switch r := ti.Extra[ClaimRoles].(type) {
	case []string:
		p.Roles = r
	case []any:
		for _, v := range r {
			if s, ok := v.(string); ok {
				p.Roles = append(p.Roles, s)
			}
		}
	case string:
		p.Roles = strings.Fields(r)
	}
	return p
}

// extraPrincipal is the TokenInfo.Extra key under which BearerVerifier keeps
// the principal it found.
const extraPrincipal = "axgate/principal"

// BearerVerifier adapts an HTTP authenticator, such as the JWT bearer of
// adapters/httpgate (httpgate.JWTBearer), to the SDK's auth.TokenVerifier, so
// that auth.RequireBearerToken guards the streamable HTTP transport and
// TokenInfoPrincipal finds the same principal an HTTP tool server would:
//
//	bearer, _ := httpgate.JWTBearer(httpgate.BearerConfig{…})
//	handler = auth.RequireBearerToken(mcpgate.BearerVerifier(bearer), nil)(handler)
//
// A refused request is answered 401 by RequireBearerToken. The token's
// expiry is its "exp" claim.
func BearerVerifier(authenticate func(*http.Request) (middleware.Principal, error)) auth.TokenVerifier {
	return func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, err := authenticate(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		ti := &auth.TokenInfo{UserID: p.ID, Scopes: p.Scopes, Extra: map[string]any{extraPrincipal: p}}
		switch exp := p.Claims["exp"].(type) {
		case float64:
			ti.Expiration = time.Unix(int64(exp), 0)
		case json.Number:
			if n, err := exp.Int64(); err == nil {
				ti.Expiration = time.Unix(n, 0)
			}
		case int64:
			ti.Expiration = time.Unix(exp, 0)
		}
		return ti, nil
	}
}

// StaticPrincipal returns a PrincipalFunc that always answers p: for a stdio
// server, which serves the one local user who started it.
func StaticPrincipal(p middleware.Principal) PrincipalFunc {
	return func(context.Context, *mcp.CallToolRequest) (middleware.Principal, error) { return p, nil }
}

// credentials reads the confirmation and approval tokens, the idempotency
// key and the claimed tenant from _meta, then from the HTTP headers. A
// credential of the wrong JSON type is refused, never ignored.
func (c config) credentials(req *mcp.CallToolRequest) (middleware.Credentials, *axerr.Error) {
	var cr middleware.Credentials
	meta := req.Params.Meta
	for k := range meta {
		if strings.HasPrefix(k, "axag/") && !knownMeta[k] {
			return cr, axerr.Newf(axerr.CodeInvalidArguments, "unknown _meta key %q", k).
				With("meta_key", k).
				WithSuggestion("Use " + MetaConfirmation + ", " + MetaApprovals + ", " + MetaIdempotencyKey + " or " + MetaTenant + ".")
		}
	}
	var err *axerr.Error
	str := func(key string) string {
		v, ok := meta[key]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok && err == nil {
			err = badMeta(key, "a string")
		}
		return s
	}
	cr.Confirmation = str(MetaConfirmation)
	cr.IdempotencyKey = str(MetaIdempotencyKey)
	cr.ClaimedTenant = str(MetaTenant)
	switch v := meta[MetaApprovals].(type) {
	case nil:
	case string:
		cr.Approvals = splitList([]string{v})
	case []string:
		cr.Approvals = v
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return cr, badMeta(MetaApprovals, "a list of strings")
			}
			cr.Approvals = append(cr.Approvals, s)
		}
	default:
		return cr, badMeta(MetaApprovals, "a list of strings")
	}
	if err != nil {
		return cr, err
	}
	if c.noHeaders || req.Extra == nil || req.Extra.Header == nil {
		return cr, nil
	}
	h := req.Extra.Header
	if cr.Confirmation == "" {
		cr.Confirmation = h.Get(HeaderConfirmation)
	}
	if cr.Approvals == nil {
		cr.Approvals = splitList(h.Values(HeaderApproval))
	}
	if cr.IdempotencyKey == "" {
		cr.IdempotencyKey = h.Get(HeaderIdempotencyKey)
	}
	if cr.ClaimedTenant == "" {
		cr.ClaimedTenant = h.Get(HeaderTenant)
	}
	return cr, nil
}

func badMeta(key, want string) *axerr.Error {
	return axerr.Newf(axerr.CodeInvalidArguments, "_meta %q must be %s", key, want).
		With("meta_key", key).
		WithSuggestion("Send the token as " + want + " in _meta, or leave the key out.")
}

// splitList accepts repeated values and comma-separated lists alike.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// metaCarrier lets an OpenTelemetry propagator read traceparent, tracestate
// and baggage from a request's _meta (string values only).
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// CredentialsMeta returns the _meta entries that carry c, for a client
// building a tools/call request (CallToolParams.Meta).
func CredentialsMeta(c middleware.Credentials) mcp.Meta {
	m := mcp.Meta{}
	if c.Confirmation != "" {
		m[MetaConfirmation] = c.Confirmation
	}
	if len(c.Approvals) > 0 {
		m[MetaApprovals] = c.Approvals
	}
	if c.IdempotencyKey != "" {
		m[MetaIdempotencyKey] = c.IdempotencyKey
	}
	if c.ClaimedTenant != "" {
		m[MetaTenant] = c.ClaimedTenant
	}
	return m
}
