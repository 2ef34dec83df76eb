package direct

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolMetaPrefix marks the _meta keys of the protocol itself.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// The streamable HTTP transport's headers.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-ID"
)

// Handler serves the tool calls that may take the direct path, and hands
// every other request to next, the SDK's streamable HTTP handler.
func (p *Path) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		var s Session
		if id := r.Header.Get(headerSessionID); id != "" {
			s = p.cfg.Sessions.Lookup(id)
		}
		if s == nil {
			next.ServeHTTP(w, r)
			return
		}
		if call, ok := p.directCall(r, s); ok {
			p.serve(w, r, s, call)
			return
		}
		// The SDK keeps an idle session only for SessionTimeout after its
		// last POST, and sees none of the direct ones: directCall sends a
		// call through the SDK when the session's last POST there is older
		// than a quarter of that. A POST of another user is refused by the
		// SDK before it counts: it must not count here either, or anyone
		// with the session's id could keep its calls off the SDK until the
		// SDK closes the session as idle.
		st := s.State()
		if sameUser(r, st) {
			st.touch()
			defer st.touch()
			p.cancelDirect(r, s)
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
	// rawMeta is the _meta as the request wrote it (nil without one).
	rawMeta json.RawMessage
}

// directCall reads r when it may take the direct path. Otherwise r's body
// is left for the SDK to read.
func (p *Path) directCall(r *http.Request, s Session) (directRequest, bool) {
	if r.Body == nil || !p.directFront(r, s) {
		return directRequest{}, false
	}
	// The body was read already, within the bound; the SDK gets the same
	// bytes when the call is not taken here.
	body, ok := p.cfg.Body(r)
	if !ok {
		return directRequest{}, false
	}
	d, ok := parseDirectMeta(body, p.decodeMeta)
	if !ok || !p.cfg.Tools[d.name] {
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

// directFront reports whether the SDK would take r as a request of the
// session as it stands: its Host, the content types of a POST, the
// session's negotiated protocol version, the user the session was started
// by, and a session the SDK has seen a POST of recently enough not to time
// it out.
func (p *Path) directFront(r *http.Request, s Session) bool {
	if !sdkTakes(r, s) {
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
	if t := p.cfg.SessionTimeout; t > 0 {
		since := time.Since(time.Unix(0, s.State().lastPOST.Load()))
		if t < 8*p.cfg.CallTimeout || since > t/4 || !s.Ready(r.Context(), t/4-since) {
			return false
		}
	}
	return true
}

// sdkTakes reports whether the SDK would take the POST r as a message of
// s: its Host, its content types, the session's negotiated
// protocol version and the user the session was started by.
func sdkTakes(r *http.Request, s Session) bool {
	st := s.State()
	if rebound(r) {
		return false // the SDK refuses it: DNS rebinding protection
	}
	switch {
	case !s.Initialized() || st.version == "" || r.Header.Get(headerProtocolVersion) != st.version:
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
	return sameUser(r, st)
}

// sameUser reports whether r is of the user l's session was started by,
// as the SDK checks it.
func sameUser(r *http.Request, st *State) bool {
	if st.userID == "" {
		return true
	}
	ti := auth.TokenInfoFromContext(r.Context())
	return ti != nil && ti.UserID == st.userID
}

// rebound reports whether r arrived on a loopback address under a Host
// that is not one, which the SDK's streamable HTTP handler refuses (its
// protection against DNS rebinding, on unless DisableLocalhostProtection).
func rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && localLoopback(local) && !isLoopback(r.Host)
}

// localLoopback is isLoopback(local.String()), read from the IP of a TCP
// address without writing it out (what isLoopback reads of its text: an
// IPv4 address in 127/8, or ::1 with any zone).
func localLoopback(local net.Addr) bool {
	if a, ok := local.(*net.TCPAddr); ok && a != nil {
		return a.IP.IsLoopback()
	}
	return isLoopback(local.String())
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
	mt, ok := MediaType(contentType)
	return ok && mt == "application/json"
}

// MediaType is the media type of a Content-Type as mime.ParseMediaType
// reads it, and whether it read it without an error (it may return a
// media type with one), without parsing the two that MCP's messages are
// sent with as they are usually written.
func MediaType(contentType string) (string, bool) {
	switch contentType {
	case "application/json", "text/event-stream":
		return contentType, true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return mt, err == nil
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
	return parseDirectMeta(body, decodeMeta)
}

// parseDirectMeta is parseDirect, the _meta decoded by decode.
func parseDirectMeta(body []byte, decode func(raw []byte) (mcp.Meta, bool)) (directRequest, bool) {
	if !json.Valid(body) || jsonscan.TooDeep(body) {
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
	ok := jsonscan.Members(body, func(k, v []byte) bool {
		switch string(k) {
		case "jsonrpc":
			return once(0) && string(v) == `"2.0"`
		case "id":
			d.id = v
			return once(1) && jsonscan.IsRequestID(v)
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
	ok = jsonscan.Members(params, func(k, v []byte) bool {
		switch string(k) {
		case "name":
			var ok bool
			d.name, ok = jsonscan.String(v)
			return once(0) && ok
		case "arguments":
			d.args = v
			return once(1)
		case "_meta":
			switch {
			case !once(2):
				return false
			case string(v) == "null":
				d.rawMeta = v
				return true
			}
			d.rawMeta = v
			if v[0] != '{' {
				return false
			}
			var ok bool
			d.meta, ok = decode(v)
			return ok
		}
		return false
	})
	if !ok || d.name == "" {
		return directRequest{}, false
	}
	return d, true
}

// decodeMeta decodes a _meta object as json.Unmarshal does.
func decodeMeta(raw []byte) (mcp.Meta, bool) {
	var m mcp.Meta
	return m, json.Unmarshal(raw, &m) == nil
}

// maxMetaKept bounds the _meta Path.decodeMeta keeps for the next call.
const maxMetaKept = 4096

// decodeMeta is decodeMeta, answered for the _meta it decoded last with
// a copy of what it decoded: an agent writes the same _meta on each
// request (on MCP 2026-07-28, its protocol version, capabilities and
// information). The copy is the call's own, as a decoded one would be.
func (p *Path) decodeMeta(raw []byte) (mcp.Meta, bool) {
	if last := p.metaDecoded.Load(); last != nil && bytes.Equal(last.raw, raw) {
		return copyMeta(last.meta), true
	}
	m, ok := decodeMeta(raw)
	if ok && len(raw) <= maxMetaKept {
		p.metaDecoded.Store(&decodedMeta{raw: bytes.Clone(raw), meta: copyMeta(m)})
	}
	return m, ok
}

// decodedMeta is a _meta as written and as decoded.
type decodedMeta struct {
	raw  []byte
	meta mcp.Meta
}

// copyMeta copies a decoded _meta: its objects and arrays are new, its
// strings, numbers, booleans and nulls the same.
func copyMeta(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	return mcp.Meta(copyObject(m))
}

func copyObject(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		return copyObject(v)
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}

// serve runs a call through the session's CallTool and writes its answer.
func (p *Path) serve(w http.ResponseWriter, r *http.Request, s Session, d directRequest) {
	st := s.State()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := requestKey(d.id)
	if !st.start(id, cancel) {
		// As the SDK answers an id that is in flight on the session, with
		// the id as the request wrote it.
		shown := string(d.id)
		if s, ok := jsonscan.String(d.id); ok {
			shown = s
		}
		raw, _ := json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %s", shown)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(jsonscan.Response(d.id, "error", raw))
		return
	}
	defer st.end(id)
	res, err := s.CallTool(ctx, &mcp.CallToolParamsRaw{Name: d.name, Arguments: d.args, Meta: d.meta},
		&mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
	if err == nil && res != nil && res.NeedsInput() {
		// Config.Tools keeps the tools that can ask off this path; an
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
			out = jsonscan.Response(d.id, "result", raw)
		}
	}
	if err != nil {
		var re *jsonrpc.Error
		if !errors.As(err, &re) {
			re = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		raw, _ := json.Marshal(re)
		out = jsonscan.Response(d.id, "error", raw)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// encodeToolResult encodes a CallToolResult as the SDK does (json.Marshal
// of its MarshalJSON), the common one (text blocks with nothing but their
// text, structuredContent, isError, _meta) without reflection over the
// SDK's wire types (TestEncodeToolResult compares the two).
func encodeToolResult(r *mcp.CallToolResult) ([]byte, error) {
	if !commonResult(r) {
		return json.Marshal(r)
	}
	return encodeCommonResult(r, nil)
}

// commonResult reports whether encodeCommonResult encodes r: no input
// requests or request state, and text blocks with nothing but their text.
func commonResult(r *mcp.CallToolResult) bool {
	if r.InputRequests != nil || r.RequestState != "" || r.NeedsInput() {
		return false
	}
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); !ok || tc == nil || tc.Meta != nil || tc.Annotations != nil {
			return false
		}
	}
	return true
}

// encodeCommonResult is encodeToolResult of a commonResult r; with a meta
// that is not nil, of r with the _meta whose encoding that is, when r has
// none of its own (r.Meta empty).
func encodeCommonResult(r *mcp.CallToolResult, meta []byte) ([]byte, error) {
	out := make([]byte, 0, 256+len(meta))
	out = append(out, '{')
	if len(r.Meta) > 0 {
		var err error
		if meta, err = json.Marshal(r.Meta); err != nil {
			return nil, err
		}
	}
	if meta != nil {
		out = append(append(out, `"_meta":`...), meta...)
		out = append(out, ',')
	}
	out = append(out, `"content":[`...)
	for i, c := range r.Content {
		tc := c.(*mcp.TextContent) // commonResult
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = jsonscan.AppendString(append(out, `{"type":"text","text":`...), tc.Text); err != nil {
			return nil, err
		}
		out = append(out, '}')
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
	if s, ok := jsonscan.String(raw); ok {
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

// start records a direct call of the session in flight, unless its id is
// in flight already.
func (st *State) start(id string, cancel context.CancelFunc) bool {
	st.inflightMu.Lock()
	defer st.inflightMu.Unlock()
	if _, dup := st.inflight[id]; dup {
		return false
	}
	if st.inflight == nil {
		st.inflight = map[string]context.CancelFunc{}
	}
	st.inflight[id] = cancel
	st.inflightN.Add(1)
	return true
}

// end forgets a direct call that has ended.
func (st *State) end(id string) {
	st.inflightMu.Lock()
	defer st.inflightMu.Unlock()
	delete(st.inflight, id)
	st.inflightN.Add(-1)
}

// cancelDirect cancels the direct call that r, a POST of s that
// goes to the SDK, cancels: a notifications/cancelled the SDK takes, whose
// requestId is a direct call of the session in flight. Its context ends,
// which ends the upstream's call as the SDK's client would (Call
// sends the upstream a notifications/cancelled of its own). The SDK still
// gets the notification and answers it; it cancels only its own calls.
func (p *Path) cancelDirect(r *http.Request, s Session) {
	st := s.State()
	if st.inflightN.Load() == 0 || r.Body == nil || !sdkTakes(r, s) {
		return
	}
	body, ok := p.cfg.Body(r)
	if !ok {
		return
	}
	id, ok := parseCancelled(body)
	if !ok {
		return
	}
	st.inflightMu.Lock()
	cancel := st.inflight[id]
	st.inflightMu.Unlock()
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
	if !json.Valid(body) || jsonscan.TooDeep(body) {
		return "", false
	}
	var (
		params []byte
		seen   [3]bool
	)
	ok := jsonscan.Members(body, func(k, v []byte) bool {
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
	ok = jsonscan.Members(params, func(k, v []byte) bool {
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

// Register records the session as started by userID (as the SDK binds
// it; "" for none) with the protocol version the gateway answered its
// initialize with, and as seen by the SDK now. Until then the session's
// calls go to the SDK. Call it before Sessions.Lookup finds the session.
func (st *State) Register(userID, version string) {
	st.userID, st.version = userID, version
	st.touch()
}

// touch records a POST of the session that the SDK handles.
func (st *State) touch() { st.lastPOST.Store(time.Now().UnixNano()) }
