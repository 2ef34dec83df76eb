package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The direct path of a tool call.
//
// Through the SDK, every call costs the gateway a second MCP server (the
// front) and a second MCP client (to the upstream), each of which decodes
// and encodes every message about as expensively as the agent's client and
// the upstream's server do: the gateway doubled the CPU of a call and
// halved the throughput (BenchmarkGatewayRead, bench/README.md). The
// common call does not need them:
//
//   - The front (directCalls): a tools/call POST on an established
//     streamable HTTP session, of a tool whose chain cannot ask the person
//     (no confirmation stage, so no elicitation and no input-required
//     result), with nothing but name, arguments and _meta in its params and
//     no progress token, is decoded once here and run through callTool — the
//     same refusals, bounds and chain as through the SDK — and answered with
//     one JSON body. Every other request, and every request that is not
//     exactly what the SDK would also accept (headers, protocol version,
//     the session's user), goes to the SDK's handler, which answers it as
//     before.
//   - The upstream (callDirect): a call to an HTTP upstream on a session of
//     a protocol version with sessions is one POST whose answer, a JSON body
//     or an event stream, is read here; the upstream's notifications and
//     requests on that stream are handled as the SDK client's handlers
//     handle them (linkHandlers).

// The streamable HTTP transport's headers.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-ID"
)

// upstreamProtocolVersion is the protocol version the gateway asks its
// upstream sessions for: the newest with sessions, as the front speaks
// (legacyVersions), so that one client session maps to one upstream
// session.
const upstreamProtocolVersion = "2025-11-25"

// directTools are the tools whose calls may take the direct path: those
// whose chain has no confirmation stage (it is the only stage that asks the
// person through the client).
func directTools(names []string, stagesFor func(string) ([]string, bool)) map[string]bool {
	out := map[string]bool{}
	for _, name := range names {
		stages, ok := stagesFor(name)
		if ok && !slices.Contains(stages, middleware.StageConfirmation) {
			out[name] = true
		}
	}
	return out
}

// directCalls serves the tool calls that may take the direct path, and
// hands every other request to next, the SDK's streamable HTTP handler.
func (g *Gateway) directCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		l := g.httpLink(r.Header.Get(headerSessionID))
		if l == nil {
			next.ServeHTTP(w, r)
			return
		}
		if call, ok := g.directCall(r, l); ok {
			g.serveDirect(w, r, l, call)
			return
		}
		// The SDK keeps an idle session only for WithSessionTimeout after
		// its last POST, and sees none of the direct ones: directCall sends
		// a call through the SDK when the session's last POST there is
		// older than a quarter of that. A POST of another user is refused
		// by the SDK before it counts: it must not count here either, or
		// anyone with the session's id could keep its calls off the SDK
		// until the SDK closes the session as idle.
		if sameUser(r, l) {
			l.touch()
			defer l.touch()
			g.cancelDirect(r, l)
		}
		next.ServeHTTP(w, r)
	})
}

// directRequest is a tools/call as the direct path read it.
type directRequest struct {
	id   json.RawMessage // a JSON string or integer
	name string
	args json.RawMessage
	meta mcp.Meta
}

// directCall reads r when it may take the direct path. Otherwise r's body
// is left for the SDK to read.
func (g *Gateway) directCall(r *http.Request, l *link) (directRequest, bool) {
	if r.Body == nil || !g.directFront(r, l) {
		return directRequest{}, false
	}
	// limitBody read the body already, within the bound; the SDK gets the
	// same bytes when the call is not taken here.
	mb, ok := r.Body.(*memBody)
	if !ok || mb.Len() != len(mb.data) {
		return directRequest{}, false
	}
	body := mb.data
	d, ok := parseDirect(body)
	if !ok || !g.direct[d.name] {
		return directRequest{}, false
	}
	if _, ok := d.meta["progressToken"]; ok {
		return directRequest{}, false // progress is the SDK's to relate to the call
	}
	for k := range d.meta {
		if strings.HasPrefix(k, protocolMetaPrefix) {
			// The protocol's own keys (SEP-2575's per-request version,
			// client info and capabilities): the SDK refuses a request
			// that names its own version on a session, and reads the rest.
			return directRequest{}, false
		}
	}
	return d, true
}

// directFront reports whether the SDK would take r as a request of l's
// session as it stands: its Host, the content types of a POST, the
// session's negotiated protocol version, the user the session was started
// by, and a session the SDK has seen a POST of recently enough not to time
// it out.
func (g *Gateway) directFront(r *http.Request, l *link) bool {
	if !sdkTakes(r, l) {
		return false
	}
	// The SDK closes a session WithSessionTimeout after the end of its
	// last POST it saw, and a direct call does not hold that timer as its
	// own calls do. So a call goes to the SDK once its last POST there is a
	// quarter of the timeout old, and the direct path is only taken when
	// WithCallTimeout is at most an eighth of the timeout: a call waits at
	// most three of those (a list of the tools after list_changed, in
	// callTool and again in forward, then the upstream), so the SDK sees a
	// POST of a busy session at least every five eighths of the timeout.
	//
	// A call also waits, before WithCallTimeout bounds it, for the
	// session's first upstream connection and for a list of its tools
	// after list_changed (callTool). So the direct path waits for the
	// first connection only as long as the quarter lasts, and leaves a
	// call of a link that is not ready to the SDK, whose POST holds its
	// idle timer while the call waits.
	if t := g.cfg.sessionTimeout; t > 0 {
		since := time.Since(time.Unix(0, l.lastPOST.Load()))
		if t < 8*g.cfg.callTimeout || since > t/4 || !l.ready(r.Context(), t/4-since) {
			return false
		}
	}
	return true
}

// sdkTakes reports whether the SDK would take the POST r as a message of
// l's session: its Host, its content types, the session's negotiated
// protocol version and the user the session was started by.
func sdkTakes(r *http.Request, l *link) bool {
	if rebound(r) {
		return false // the SDK refuses it: DNS rebinding protection
	}
	switch {
	case l.client.InitializeParams() == nil || l.version == "" || r.Header.Get(headerProtocolVersion) != l.version:
		// The version the session agreed on, not the one the client asked
		// for in its initialize (the SDK refuses a version it does not
		// speak).
		return false
	case len(r.Header.Values(headerLastEventID)) > 0:
		return false
	case !isJSON(r.Header.Get("Content-Type")):
		return false
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	// The SDK refuses a POST of another user: session user mismatch.
	return sameUser(r, l)
}

// sameUser reports whether r is of the user l's session was started by,
// as the SDK checks it.
func sameUser(r *http.Request, l *link) bool {
	if l.userID == "" {
		return true
	}
	ti := auth.TokenInfoFromContext(r.Context())
	return ti != nil && ti.UserID == l.userID
}

// rebound reports whether r arrived on a loopback address under a Host
// that is not one, which the SDK's streamable HTTP handler refuses (its
// protection against DNS rebinding, on unless DisableLocalhostProtection).
func rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && isLoopback(local.String()) && !isLoopback(r.Host)
}

// isLoopback reads an address as the SDK does (internal/util.IsLoopback).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// accepts reads an Accept header as the SDK's streamable HTTP handler does.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for value != "" {
			var raw string
			raw, value, _ = strings.Cut(value, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// parseDirect reads a single JSON-RPC tools/call request whose params are
// name, arguments and _meta, each key written once and without escapes;
// anything else (a batch, a notification, other params such as the answer
// to an input request, a name that is not a string, a key spelled twice)
// is the SDK's to read.
func parseDirect(body []byte) (directRequest, bool) {
	if !json.Valid(body) || tooDeep(body) {
		return directRequest{}, false
	}
	var (
		d      directRequest
		params []byte
		seen   [4]bool
	)
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok := members(body, func(k, v []byte) bool {
		switch string(k) {
		case "jsonrpc":
			return once(0) && string(v) == `"2.0"`
		case "id":
			d.id = v
			return once(1) && isRequestID(v)
		case "method":
			return once(2) && string(v) == `"tools/call"`
		case "params":
			params = v
			return once(3)
		}
		return false
	})
	if !ok || seen != [4]bool{true, true, true, true} {
		return directRequest{}, false
	}
	seen = [4]bool{}
	ok = members(params, func(k, v []byte) bool {
		switch string(k) {
		case "name":
			var ok bool
			d.name, ok = jsonString(v)
			return once(0) && ok
		case "arguments":
			d.args = v
			return once(1)
		case "_meta":
			switch {
			case !once(2):
				return false
			case string(v) == "null":
				return true
			}
			return v[0] == '{' && json.Unmarshal(v, &d.meta) == nil
		}
		return false
	})
	if !ok || d.name == "" {
		return directRequest{}, false
	}
	return d, true
}

// isRequestID reports whether raw is a JSON-RPC id the SDK takes: a string,
// or an integer.
func isRequestID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		_, ok := jsonString(raw)
		return ok
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// serveDirect runs a call through callTool and writes its answer.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, l *link, d directRequest) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := requestKey(d.id)
	if !l.startDirect(id, cancel) {
		// As the SDK answers an id that is in flight on the session, with
		// the id as the request wrote it.
		shown := string(d.id)
		if s, ok := jsonString(d.id); ok {
			shown = s
		}
		raw, _ := json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %s", shown)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(directResponse(d.id, "error", raw))
		return
	}
	defer l.endDirect(id)
	req := &mcp.CallToolRequest{
		Session: l.client,
		Params:  &mcp.CallToolParamsRaw{Name: d.name, Arguments: d.args, Meta: d.meta},
		Extra:   &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
	res, err := g.httpFront.callTool(ctx, req)
	if err == nil && res != nil && res.NeedsInput() {
		// directTools keeps the tools that can ask off this path; an
		// upstream's input request is not relayed.
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call needs input the gateway cannot ask for on this request"}
	}
	var out []byte
	if err == nil {
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if res.Content == nil {
			c := *res
			c.Content = []mcp.Content{} // as the SDK answers: never "null"
			res = &c
		}
		var raw []byte
		if raw, err = encodeToolResult(res); err == nil {
			out = directResponse(d.id, "result", raw)
		}
	}
	if err != nil {
		var re *jsonrpc.Error
		if !errors.As(err, &re) {
			re = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		raw, _ := json.Marshal(re)
		out = directResponse(d.id, "error", raw)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// encodeToolResult encodes a CallToolResult as the SDK does (json.Marshal
// of its MarshalJSON), the common one (text blocks with nothing but their
// text, structuredContent, isError, _meta) without reflection over the
// SDK's wire types (TestEncodeToolResult compares the two).
func encodeToolResult(r *mcp.CallToolResult) ([]byte, error) {
	if r.InputRequests != nil || r.RequestState != "" || r.NeedsInput() {
		return json.Marshal(r)
	}
	out := make([]byte, 0, 256)
	out = append(out, '{')
	if len(r.Meta) > 0 {
		meta, err := json.Marshal(r.Meta)
		if err != nil {
			return nil, err
		}
		out = append(append(out, `"_meta":`...), meta...)
		out = append(out, ',')
	}
	out = append(out, `"content":[`...)
	for i, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok || tc == nil || tc.Meta != nil || tc.Annotations != nil {
			return json.Marshal(r)
		}
		if i > 0 {
			out = append(out, ',')
		}
		text, err := json.Marshal(tc.Text)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, `{"type":"text","text":`...), text...), '}')
	}
	out = append(out, ']')
	if r.StructuredContent != nil {
		sc, err := json.Marshal(r.StructuredContent)
		if err != nil {
			return nil, err
		}
		out = append(append(out, `,"structuredContent":`...), sc...)
	}
	if r.IsError {
		out = append(out, `,"isError":true`...)
	}
	return append(out, '}'), nil
}

// requestKey is the key of a JSON-RPC id in the direct calls in flight:
// a string by its text, an integer by its value, exactly. (The SDK keys its
// own through float64, so that 2^53 and 2^53+1, or 9 and 9.5, are one id
// to it: a cancellation here names one call or none.) raw is a JSON string
// or an integer literal; anything else has no key.
func requestKey(raw []byte) string {
	if s, ok := jsonString(raw); ok {
		if strings.ContainsRune(s, utf8.RuneError) {
			// A lone surrogate escape and a byte that is not UTF-8 decode
			// to U+FFFD, as U+FFFD does: such an id is keyed as written.
			return "r" + string(raw)
		}
		return "s" + s
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return "n" + strconv.FormatInt(n, 10)
	}
	return ""
}

// startDirect records a direct call of l's session in flight, unless its
// id is in flight already.
func (l *link) startDirect(id string, cancel context.CancelFunc) bool {
	l.inflightMu.Lock()
	defer l.inflightMu.Unlock()
	if _, dup := l.inflight[id]; dup {
		return false
	}
	if l.inflight == nil {
		l.inflight = map[string]context.CancelFunc{}
	}
	l.inflight[id] = cancel
	l.inflightN.Add(1)
	return true
}

// endDirect forgets a direct call that has ended.
func (l *link) endDirect(id string) {
	l.inflightMu.Lock()
	defer l.inflightMu.Unlock()
	delete(l.inflight, id)
	l.inflightN.Add(-1)
}

// cancelDirect cancels the direct call that r, a POST of l's session that
// goes to the SDK, cancels: a notifications/cancelled the SDK takes, whose
// requestId is a direct call of the session in flight. Its context ends,
// which ends the upstream's call as the SDK's client would (callDirect
// sends the upstream a notifications/cancelled of its own). The SDK still
// gets the notification and answers it; it cancels only its own calls.
func (g *Gateway) cancelDirect(r *http.Request, l *link) {
	if l.inflightN.Load() == 0 || r.Body == nil || !sdkTakes(r, l) {
		return
	}
	mb, ok := r.Body.(*memBody)
	if !ok || mb.Len() != len(mb.data) {
		return
	}
	id, ok := parseCancelled(mb.data)
	if !ok {
		return
	}
	l.inflightMu.Lock()
	cancel := l.inflight[id]
	l.inflightMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// parseCancelled reads a single JSON-RPC notifications/cancelled and
// returns the key (requestKey) of the id it cancels. It reads no more than
// the SDK does, and less: the params' requestId spelled exactly so (the
// SDK's decoder matches keys by case, encoding/json does not), once, a
// string or an integer literal, in params the SDK can decode.
func parseCancelled(body []byte) (string, bool) {
	if !json.Valid(body) || tooDeep(body) {
		return "", false
	}
	var (
		params []byte
		seen   [3]bool
	)
	ok := members(body, func(k, v []byte) bool {
		switch string(k) {
		case "jsonrpc":
			seen[0] = !seen[0] && string(v) == `"2.0"`
			return seen[0]
		case "method":
			seen[1] = !seen[1] && string(v) == `"notifications/cancelled"`
			return seen[1]
		case "params":
			if seen[2] {
				return false
			}
			params, seen[2] = v, true
			return true
		}
		return false // an id: a request, not a notification
	})
	if !ok || seen != [3]bool{true, true, true} {
		return "", false
	}
	var id []byte
	ok = members(params, func(k, v []byte) bool {
		if string(k) != "requestId" {
			return true
		}
		if id != nil {
			return false // twice
		}
		id = v
		return true
	})
	if !ok || id == nil {
		return "", false
	}
	var p mcp.CancelledParams
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	key := requestKey(id)
	return key, key != ""
}

func directResponse(id json.RawMessage, field string, raw []byte) []byte {
	out := make([]byte, 0, len(raw)+len(id)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"`...)
	out = append(out, field...)
	out = append(out, `":`...)
	out = append(out, raw...)
	return append(out, '}')
}

// httpLink is the upstream link of the streamable HTTP session with that
// id, or nil.
func (g *Gateway) httpLink(sessionID string) *link {
	if sessionID == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[sessionID]
}

// registerHTTP makes l's session reachable by its id for the direct path,
// bound to the user that started it (as the SDK binds it) and to the
// protocol version the gateway answered its initialize with.
func (g *Gateway) registerHTTP(l *link, sessionID, userID, version string) {
	if sessionID == "" {
		return
	}
	l.userID, l.version = userID, version
	l.touch()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && g.links[l.client] == l {
		g.byID[sessionID] = l
	}
}

// touch records a POST of l's session that the SDK handles.
func (l *link) touch() { l.lastPOST.Store(time.Now().UnixNano()) }
