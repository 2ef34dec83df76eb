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
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/middleware"
)

// Claims of TokenInfo.Extra that BearerPrincipal reads.
const (
	ClaimTenant = "tenant"
	ClaimRoles  = "roles"
)

var errNoTokenInfo = errors.New("mcpgate: no verified bearer token")

// BearerPrincipal is the default PrincipalFunc: the principal of the bearer
// token the transport verified (the SDK's auth.RequireBearerToken puts it on
// the request), as PrincipalFromTokenInfo maps it. A request without one is refused with AXGATE_UNAUTHENTICATED.
func BearerPrincipal(_ context.Context, req *mcp.CallToolRequest) (middleware.Principal, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return middleware.Principal{}, errNoTokenInfo
	}
	return PrincipalFromTokenInfo(req.Extra.TokenInfo), nil
}

// PrincipalFromTokenInfo maps a verified bearer token to a principal.
//
// A token verified by BearerVerifier carries the principal its
// authenticator found. Otherwise ID is the token's user, Scopes its
// scopes, Claims its extra claims, Tenant the "tenant" claim and Roles the
// "roles" claim (a list, or a space-separated string).
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

// BearerVerifier adapts an HTTP authenticator to the SDK's auth.TokenVerifier.
//
// The authenticator may be the JWT bearer of adapters/httpgate
// (httpgate.JWTBearer). With it, auth.RequireBearerToken guards the
// streamable HTTP transport and BearerPrincipal finds the same principal
// an HTTP tool server would:
//
//	bearer, _ := httpgate.JWTBearer(httpgate.BearerConfig{…})
//	handler = auth.RequireBearerToken(mcpgate.BearerVerifier(bearer), nil)(handler)
//
// A refused request is answered 401 by RequireBearerToken. The token's
// expiry is its "exp" claim. The TokenInfo's UserID, to which the SDK binds
// a streamable HTTP session, names the tenant as well as the user, so that
// a session is never continued with the token of the same user id in
// another tenant.
func BearerVerifier(authenticate func(*http.Request) (middleware.Principal, error)) auth.TokenVerifier {
	return func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, err := authenticate(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		ti := &auth.TokenInfo{UserID: sessionUserID(p), Scopes: p.Scopes, Extra: map[string]any{extraPrincipal: p}}
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
	cr, err := wire.FromMeta(req.Params.Meta)
	if err != nil || c.noHeaders || req.Extra == nil || req.Extra.Header == nil {
		return cr, err
	}
	return wire.Merge(cr, wire.FromHeader(req.Extra.Header)), nil
}

// CredentialsMeta returns the _meta entries that carry c, for a client
// building a tools/call request (CallToolParams.Meta).
func CredentialsMeta(c middleware.Credentials) mcp.Meta { return mcp.Meta(wire.ToMeta(c)) }

// sessionUserID is the user id a session is bound to: the principal's id,
// with its tenant when it has one (as a JSON array, which no plain id is
// taken for).
func sessionUserID(p middleware.Principal) string {
	if p.Tenant == "" && !strings.HasPrefix(p.ID, "[") {
		return p.ID
	}
	raw, _ := json.Marshal([2]string{p.Tenant, p.ID})
	return string(raw)
}
