package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
)

// headerProtocolVersion is the streamable HTTP transport's header of the
// protocol version.
const headerProtocolVersion = "Mcp-Protocol-Version"

// The standard headers of MCP 2026-07-28's streamable HTTP transport
// (SEP-2243): a POST mirrors its JSON-RPC method, and the name or URI it
// targets, into headers, so that a load balancer, a WAF or a rate limiter
// in front of the gateway can route and decide on them without reading the
// body. What the gateway runs is the body: a header that says one thing
// while the body says another would let a request through a decision made
// on the header (a WAF that blocks tools/call of delete_note) that the
// gateway then runs as the body's. So a header that does not match the
// body is refused (HTTP 400, JSON-RPC -32020 HeaderMismatch, as the
// specification requires), on every protocol version, before the SDK or
// the direct path reads the request; and on 2026-07-28 and later, a
// request without the headers the specification requires is refused too.
// The gateway's policy never reads these headers.
const (
	headerMcpMethod = "Mcp-Method"
	headerMcpName   = "Mcp-Name"
	// standardHeadersVersion is the first protocol version that requires
	// the headers.
	standardHeadersVersion = "2026-07-28"
)

// checkStandardHeaders refuses a POST whose Mcp-Method or Mcp-Name header
// does not match its body, and passes every other request to next. It runs
// after limitBody, which read the body.
func checkStandardHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		methods, names := r.Header.Values(headerMcpMethod), r.Header.Values(headerMcpName)
		modern := r.Header.Get(headerProtocolVersion) >= standardHeadersVersion
		if len(methods) == 0 && len(names) == 0 && !modern {
			next.ServeHTTP(w, r) // the common case: nothing to compare
			return
		}
		mb, ok := r.Body.(*memBody)
		if !ok {
			headerMismatch(w, nil, "the request body cannot be compared with its headers")
			return
		}
		id, problem := compareHeaders(mb.data, methods, names, modern)
		if problem != "" {
			headerMismatch(w, id, problem)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// compareHeaders compares the Mcp-Method and Mcp-Name headers with the
// JSON-RPC message body, and says what does not match ("" when all
// matches); id is the request's id, when it has one. The body is read by
// members, as the direct path reads it: a key spelled twice or with an
// escape has no one meaning, and is a mismatch here.
func compareHeaders(body []byte, methods, names []string, modern bool) (id json.RawMessage, problem string) {
	if len(methods) > 1 || len(names) > 1 {
		return nil, "the request has more than one Mcp-Method or Mcp-Name header"
	}
	var (
		method, params []byte
		seen           jsonscan.Keys
	)
	ok := jsonscan.Members(body, func(k, v []byte) bool {
		if !seen.Add(k) {
			return false
		}
		switch string(k) {
		case "id":
			id = v
		case "method":
			method = v
		case "params":
			params = v
		}
		return true
	})
	if !ok || jsonscan.TooDeep(body) {
		// A batch, a key spelled twice or with an escape, not JSON.
		return nil, "the request body is not one JSON-RPC message the headers can be compared with"
	}
	bodyMethod := ""
	if method != nil {
		if bodyMethod, ok = jsonscan.String(method); !ok {
			return id, "the request's method is not a string"
		}
	}
	switch {
	case len(methods) == 1 && methods[0] != bodyMethod:
		return id, fmt.Sprintf("the Mcp-Method header %q does not match the body's method %q", methods[0], bodyMethod)
	case len(methods) == 0 && modern && bodyMethod != "":
		return id, "the Mcp-Method header is missing"
	}
	field := nameField(bodyMethod)
	bodyName, named := "", false
	if field != "" && params != nil {
		var nameRaw []byte
		seen = jsonscan.Keys{}
		if !jsonscan.Members(params, func(k, v []byte) bool {
			if !seen.Add(k) {
				return false
			}
			if string(k) == field {
				nameRaw = v
			}
			return true
		}) {
			return id, "the request's params are not an object the headers can be compared with"
		}
		if nameRaw != nil {
			if bodyName, named = jsonscan.String(nameRaw); !named {
				return id, "the request's " + field + " is not a string"
			}
		}
	}
	if len(names) == 1 {
		header, err := decodeHeaderValue(names[0])
		if err != nil {
			return id, "the Mcp-Name header " + err.Error()
		}
		if !named || header != bodyName {
			return id, fmt.Sprintf("the Mcp-Name header %q does not match the body's %s %q", header, cmpField(field), bodyName)
		}
	} else if modern && named {
		return id, "the Mcp-Name header is missing"
	}
	return id, ""
}

// nameField is the param that Mcp-Name mirrors for method: the name of a
// tool or prompt, the URI of a resource; "" for the methods without one.
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "uri"
	}
	return ""
}

func cmpField(field string) string {
	if field == "" {
		return "name (it has none)"
	}
	return field
}

// decodeHeaderValue reads a header value as the specification writes one
// that is not plain ASCII: "=?base64?…?=", the UTF-8 bytes in base64.
func decodeHeaderValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return "", fmt.Errorf("starts with =?base64? but does not end with ?=")
	}
	raw, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("is not valid base64")
	}
	return string(raw), nil
}

// headerMismatch answers a request whose headers do not match its body:
// HTTP 400 with the JSON-RPC error HeaderMismatch, its data the AXAG error.
func headerMismatch(w http.ResponseWriter, id json.RawMessage, problem string) {
	e := axerr.New(axerr.CodeInvalidArguments, problem+"; the gateway runs what the body says, and refuses a request whose standard headers say otherwise").
		With("reason", "header_mismatch").
		WithSuggestion("Send the Mcp-Method and Mcp-Name headers as the body's method and name (or URI), or leave them out on protocol versions before " + standardHeadersVersion + ".")
	re := mcpgate.JSONRPCError(e)
	re.Code = mcp.CodeHeaderMismatch
	raw, _ := json.Marshal(re)
	if len(id) == 0 || !jsonscan.IsRequestID(id) {
		id = nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	if id == nil {
		w.Write(jsonscan.Response(json.RawMessage("null"), "error", raw))
		return
	}
	w.Write(jsonscan.Response(id, "error", raw))
}

// privateLists marks the results the front lists per caller (tools/list
// and the other lists, resources/read) private to caches, as MCP
// 2026-07-28's caching hints provide: cacheScope "private" (a cache shared
// across callers must not serve one caller's list to another) and ttlMs 0
// (a manifest's grants and the upstream's tools change while a client
// holds a list). It wraps the front's other receiving middleware, so that
// it sees every answer, the upstream's passed on included.
func privateLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil {
			markPrivate(res)
		}
		return res, err
	}
}

// markPrivate sets the caching hints of a cacheable result to private and
// immediately stale.
func markPrivate(res mcp.Result) {
	var c *mcp.Cacheable
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		c = &r.Cacheable
	case *mcp.ListPromptsResult:
		c = &r.Cacheable
	case *mcp.ListResourcesResult:
		c = &r.Cacheable
	case *mcp.ListResourceTemplatesResult:
		c = &r.Cacheable
	case *mcp.ReadResourceResult:
		c = &r.Cacheable
	default:
		return
	}
	c.CacheScope, c.TTLMs = "private", 0
}

// privateCacheable is the front's ServerOptions.SetCacheable: the results
// the SDK builds are private to the caller too.
func privateCacheable(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.CacheScope, c.TTLMs = "private", 0
}
