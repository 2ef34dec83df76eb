package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The direct path's upstream leg on an upstream session of MCP 2026-07-28
// (no session id: every request carries the protocol's _meta): what of it
// is the go-sdk client's own, taken from that client.

// statelessUp is what the direct path needs of a stateless upstream
// session: its protocol _meta, as the SDK's client writes it on each
// request, once per session.
type statelessUp struct {
	cs   *mcp.ClientSession
	meta mcp.Meta // each value the JSON the SDK writes (json.RawMessage)
}

// metaCapture takes the params of a tools/call the SDK's client was about
// to send (captureMeta): its protocol _meta is then in them.
type metaCapture struct{ meta mcp.Meta }

type metaCaptureKey struct{}

// errMetaCaptured ends a tools/call that captureMeta sent no further.
var errMetaCaptured = errors.New("gateway: the request's _meta was read; nothing was sent")

// captureMeta is the SDK client's outermost sending middleware: a
// tools/call whose context carries a *metaCapture is not sent; its params,
// with the _meta the client put in them (ClientSession.CallTool on the
// stateless protocol), are kept in it.
func captureMeta(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c, ok := ctx.Value(metaCaptureKey{}).(*metaCapture)
		if !ok {
			return next(ctx, method, req)
		}
		if p, ok := req.GetParams().(*mcp.CallToolParams); ok && method == "tools/call" {
			c.meta = p.Meta
		}
		return nil, errMetaCaptured
	}
}

// statelessMeta is the protocol _meta the SDK's client puts in each
// request of cs (protocol version, client information, capabilities),
// each value encoded as the client encodes it; ok false when it cannot be
// had (the call then goes through the SDK's client).
func (l *link) statelessMeta(cs *mcp.ClientSession) (mcp.Meta, bool) {
	if s := l.conn.stateless.Load(); s != nil && s.cs == cs {
		return s.meta, true
	}
	c := new(metaCapture)
	p := &mcp.CallToolParams{Arguments: map[string]any{}}
	if _, err := cs.CallTool(context.WithValue(l.ctx, metaCaptureKey{}, c), p); !errors.Is(err, errMetaCaptured) || len(c.meta) == 0 {
		return nil, false
	}
	meta := make(mcp.Meta, len(c.meta))
	for k, v := range c.meta {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		meta[k] = json.RawMessage(raw)
	}
	l.conn.stateless.Store(&statelessUp{cs: cs, meta: meta})
	return meta, true
}

// statelessDirect reports whether a call of tool on cs takes the direct
// path to a stateless upstream, and puts the protocol _meta in params as
// the SDK's client would: keys the params have are kept. A tool whose
// definition has a parameter mirrored in a header (x-mcp-header), which
// the SDK's client adds as Mcp-Param-*, goes through the SDK.
func (b *backend) statelessDirect(l *link, cs *mcp.ClientSession, params *mcp.CallToolParams) bool {
	if b.cfg.sdkOnly || b.direct.StatelessVersion(cs) == "" || l.headerParams(params.Name) {
		return false
	}
	meta, ok := l.statelessMeta(cs)
	if !ok {
		return false
	}
	if params.Meta == nil {
		params.Meta = make(mcp.Meta, len(meta))
	}
	for k, v := range meta {
		if _, ok := params.Meta[k]; !ok {
			params.Meta[k] = v
		}
	}
	return true
}

// headerParams reports whether the upstream's definition of tool mirrors
// a parameter in a header (x-mcp-header), or is not known. The answer is
// kept with the definition it was read from (l.conn.headerParams).
func (l *link) headerParams(tool string) bool {
	t := l.offered()[tool]
	if t == nil {
		return true
	}
	if v, ok := l.conn.headerParams.Load(tool); ok {
		if h := v.(toolHeaders); h.def == t {
			return h.has
		}
	}
	raw, err := json.Marshal(t.InputSchema)
	has := err != nil || strings.Contains(string(raw), "x-mcp-header")
	l.conn.headerParams.Store(tool, toolHeaders{def: t, has: has})
	return has
}

// toolHeaders is whether a tool's definition def mirrors a parameter in a
// header.
type toolHeaders struct {
	def *mcp.Tool
	has bool
}

// replayKey carries a *replay on a call's context.
type replayKey struct{}

// replay is an upstream's answer to a tools/call that the direct path
// sent already: the SDK's client is handed it as the answer to its own
// first POST of the call (replayTransport), so that its multi-round-trip
// handling takes up the upstream's inputRequests as if it had sent it.
type replay struct {
	result json.RawMessage
	used   atomic.Bool
}

// withReplay is ctx with the answer the next tools/call POST of the SDK's
// client on it gets without sending it.
func withReplay(ctx context.Context, result json.RawMessage) context.Context {
	return context.WithValue(ctx, replayKey{}, &replay{result: result})
}

// replayTransport answers the first tools/call POST whose context carries
// a replay with it, the result under the request's own id; every other
// request goes to next, unless failed: the connection failed (failUp),
// and nothing more is sent.
type replayTransport struct {
	next   http.RoundTripper
	failed *atomic.Bool
}

// errConnFailed is the answer to a request of a connection that failed.
var errConnFailed = errors.New("gateway: the upstream connection failed")

func (t replayTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.failed != nil && t.failed.Load() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errConnFailed
	}
	rp, ok := r.Context().Value(replayKey{}).(*replay)
	if !ok || r.Method != http.MethodPost || r.Body == nil || rp.used.Load() {
		return lateSessionIgnored(r, t.next.RoundTrip)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var id json.RawMessage
	var method string
	jsonscan.Members(body, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			id = v
		case "method":
			method, _ = jsonscan.String(v)
		}
		return true
	})
	if method != "tools/call" || !jsonscan.IsRequestID(id) || !rp.used.CompareAndSwap(false, true) {
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		return lateSessionIgnored(r, t.next.RoundTrip)
	}
	out := jsonscan.Response(id, "result", rp.result)
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(out)),
		ContentLength: int64(len(out)),
		Request:       r,
	}, nil
}

// lateSessionIgnored sends r and drops the Mcp-Session-Id of the response
// to a request sent without one that is not an initialize: a session id
// is given by initialize's answer or not at all, and the direct path does
// not take up one appearing later (on an upstream without sessions), so the
// go-sdk's client does not either.
func lateSessionIgnored(r *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := send(r)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || resp.Header.Get("Mcp-Session-Id") == "" || r.GetBody == nil {
		return resp, err
	}
	body, berr := r.GetBody()
	if berr != nil {
		return resp, err
	}
	raw, berr := io.ReadAll(body)
	body.Close()
	if berr != nil {
		return resp, err
	}
	method := "initialize" // unless the body says otherwise
	jsonscan.Members(raw, func(k, v []byte) bool {
		if string(k) == "method" {
			method, _ = jsonscan.String(v)
		}
		return true
	})
	if method != "initialize" {
		resp.Header.Del("Mcp-Session-Id")
	}
	return resp, err
}

// withoutResultType is res without the resultType an upstream's result
// was read with ("complete": the SDK's client keeps it in the result, and
// its server would write it to a client of any version, where the direct
// path writes none): the front writes a result's type as its client's
// version asks. res is complete, so it has no input requests and request
// state to keep.
func withoutResultType(res *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: res.Meta, Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}
}

// connFailure is the failed flag of the transport cs was connected on
// (replayTransport), kept by the link while cs is its session.
func connFailure(t mcp.Transport) *atomic.Bool {
	st, ok := t.(*mcp.StreamableClientTransport)
	if !ok || st.HTTPClient == nil {
		return nil
	}
	rt, ok := st.HTTPClient.Transport.(replayTransport)
	if !ok {
		return nil
	}
	return rt.failed
}

// failUp fails the HTTP connection of cs as the SDK's client fails it on
// an answer it cannot read (nothing more is sent on it), and closes cs:
// the link connects a new session.
func (l *link) failUp(cs *mcp.ClientSession) {
	if f, ok := l.conn.failOf.Load(cs); ok {
		f.(*atomic.Bool).Store(true)
	}
	cs.Close()
}
