// Package wire holds the conventions every transport adapter of axgate shares.
//
// With them an HTTP tool server, an MCP server and an agent SDK read a call's
// credentials the same way: the HTTP headers, the keys of an MCP request's
// _meta, and a carrier that lets an OpenTelemetry propagator read a trace
// context from _meta. The header names and _meta keys are wire strings,
// documented in the README; a client sends them by their strings.
package wire

import (
	"net/http"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// HTTP headers that carry a call's credentials.
const (
	// HeaderConfirmation carries a confirmation token.
	HeaderConfirmation = "X-AXAG-Confirmation"
	// HeaderApproval carries approval tokens: the header repeated, or
	// comma-separated (a JWT never contains a comma).
	HeaderApproval = "X-AXAG-Approval"
	// HeaderIdempotencyKey carries the idempotency key (IETF draft).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderTenant carries the tenant the request claims to act in.
	HeaderTenant = "X-AXAG-Tenant"
)

// Keys of an MCP tools/call request's _meta that carry a call's credentials.
const (
	MetaConfirmation   = "axag/confirmation"
	MetaApprovals      = "axag/approvals"
	MetaIdempotencyKey = "axag/idempotency_key"
	MetaTenant         = "axag/tenant"
)

var knownMeta = map[string]bool{MetaConfirmation: true, MetaApprovals: true, MetaIdempotencyKey: true, MetaTenant: true}

// The credential headers' keys as net/http stores them (canonical form):
// reading them needs no canonicalization, which would allocate on every
// request.
var (
	keyConfirmation   = http.CanonicalHeaderKey(HeaderConfirmation)
	keyApproval       = http.CanonicalHeaderKey(HeaderApproval)
	keyIdempotencyKey = http.CanonicalHeaderKey(HeaderIdempotencyKey)
	keyTenant         = http.CanonicalHeaderKey(HeaderTenant)
)

// FromHeader reads a call's credentials from HTTP headers.
func FromHeader(h http.Header) middleware.Credentials {
	return middleware.Credentials{
		Confirmation:   Header(h, keyConfirmation),
		Approvals:      SplitList(h[keyApproval]),
		IdempotencyKey: Header(h, keyIdempotencyKey),
		ClaimedTenant:  Header(h, keyTenant),
	}
}

// Header returns the first value of a header by its canonical key (as
// http.CanonicalHeaderKey gives it), without allocating.
func Header(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// FromMeta reads a call's credentials from an MCP request's _meta. A
// credential of the wrong JSON type, or an axag/ key it does not know (a
// misspelling would otherwise drop a token silently), is refused with
// AXGATE_INVALID_ARGUMENTS.
func FromMeta(meta map[string]any) (middleware.Credentials, *axerr.Error) {
	var cr middleware.Credentials
	for k := range meta {
		if strings.HasPrefix(k, "axag/") && !knownMeta[k] {
			return cr, axerr.Newf(axerr.CodeInvalidArguments, "unknown _meta key %q", k).With("meta_key", k).
				WithSuggestion("Use " + MetaConfirmation + ", " + MetaApprovals + ", " + MetaIdempotencyKey + " or " + MetaTenant + ".")
		}
	}
	for key, dst := range map[string]*string{MetaConfirmation: &cr.Confirmation, MetaIdempotencyKey: &cr.IdempotencyKey, MetaTenant: &cr.ClaimedTenant} {
		switch v := meta[key].(type) {
		case nil:
		case string:
			*dst = v
		default:
			return cr, badMeta(key, "a string")
		}
	}
	switch v := meta[MetaApprovals].(type) {
	case nil:
	case string:
		cr.Approvals = SplitList([]string{v})
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
	return cr, nil
}

func badMeta(key, want string) *axerr.Error {
	return axerr.Newf(axerr.CodeInvalidArguments, "_meta %q must be %s", key, want).With("meta_key", key).
		WithSuggestion("Send the credential as " + want + " in _meta, or leave the key out.")
}

// Merge fills what primary lacks from fallback: _meta wins over headers.
func Merge(primary, fallback middleware.Credentials) middleware.Credentials {
	if primary.Confirmation == "" {
		primary.Confirmation = fallback.Confirmation
	}
	if primary.Approvals == nil {
		primary.Approvals = fallback.Approvals
	}
	if primary.IdempotencyKey == "" {
		primary.IdempotencyKey = fallback.IdempotencyKey
	}
	if primary.ClaimedTenant == "" {
		primary.ClaimedTenant = fallback.ClaimedTenant
	}
	return primary
}

// ToMeta returns the _meta entries that carry c, for a client building a
// tools/call request.
func ToMeta(c middleware.Credentials) map[string]any {
	m := map[string]any{}
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

// SplitList accepts repeated values and comma-separated lists alike.
func SplitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// MetaCarrier lets an OpenTelemetry propagator read (and write) traceparent,
// tracestate and baggage in an MCP request's _meta; only string values count.
type MetaCarrier map[string]any

// Get returns the string value of key, or "".
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set stores value under key.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys lists the keys of the carrier.
func (m MetaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
