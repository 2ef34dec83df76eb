package direct

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The standard headers of MCP 2026-07-28 (SEP-2243) that the SDK compares
// with the body.
const (
	headerMcpMethod   = "Mcp-Method"
	headerMcpName     = "Mcp-Name"
	headerParamPrefix = "Mcp-Param-"
)

// Stateless serves the stateless tool calls that may take the direct path.
//
// Those are calls of MCP 2026-07-28 and later (no session: each request on
// its own); every other request goes to next, the SDK's stateless
// streamable HTTP handler, with its body unread. A call is taken here only when the SDK would take it as it stands and
// run the tool with the same params: a POST of one of
// Config.StatelessVersions in its header and in its _meta, the
// Mcp-Method and Mcp-Name headers equal to the body's method and name as
// written, no Mcp-Param-* header, the content types the SDK asks for, a
// tool of Config.StatelessTools, params of nothing but name, arguments and
// _meta, and in _meta no progress token and no key of the protocol the SDK
// reads otherwise than here. Its answer is one JSON body: the result as the
// SDK encodes it on that version (resultType, the server's serverInfo in
// _meta) or the JSON-RPC error.
func (p *Path) Stateless(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := p.statelessCall(r); ok {
			p.serveStateless(w, r, d)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statelessCall reads r when it may take the direct path. Otherwise r's
// body is left for the SDK to read.
func (p *Path) statelessCall(r *http.Request) (directRequest, bool) {
	if r.Method != http.MethodPost || r.Body == nil || p.cfg.StatelessCall == nil {
		return directRequest{}, false
	}
	version := r.Header.Get(headerProtocolVersion)
	if !slices.Contains(p.cfg.StatelessVersions, version) || rebound(r) ||
		!isJSON(r.Header.Get("Content-Type")) || len(r.Header.Values(headerLastEventID)) > 0 {
		return directRequest{}, false
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return directRequest{}, false
	}
	methods, names := r.Header.Values(headerMcpMethod), r.Header.Values(headerMcpName)
	if len(methods) != 1 || methods[0] != "tools/call" || len(names) != 1 {
		return directRequest{}, false
	}
	for k := range r.Header {
		if strings.HasPrefix(k, headerParamPrefix) {
			return directRequest{}, false // the SDK's to compare with the tool's annotations
		}
	}
	body, ok := p.cfg.Body(r)
	if !ok || len(body) > mcp.DefaultMaxRequestBodyBytes {
		return directRequest{}, false
	}
	d, ok := parseDirectMeta(body, p.decodeMeta)
	if !ok || !p.cfg.StatelessTools[d.name] || names[0] != d.name {
		return directRequest{}, false
	}
	if !p.statelessMetaOK(d, version) {
		return directRequest{}, false
	}
	return d, true
}

// statelessMetaOK is statelessMeta, answered without checking again for
// the _meta (and version) it accepted last: its answer depends on nothing
// else.
func (p *Path) statelessMetaOK(d directRequest, version string) bool {
	if last := p.metaSeen.Load(); last != nil && d.meta != nil && last.version == version && bytes.Equal(last.raw, d.rawMeta) {
		return true
	}
	if !statelessMeta(d, version) {
		return false
	}
	p.metaSeen.Store(&seenMeta{version: version, raw: bytes.Clone(d.rawMeta)})
	return true
}

// statelessMeta reports whether the _meta of a stateless call is one the
// SDK takes and reads as the direct path does: each key once; the
// protocol's version, equal to the header's; the client's capabilities, and
// its client information if any, of the SDK's types; its log level (which
// a tool call on this path never uses); no other key of the protocol, and
// no progress token.
func statelessMeta(d directRequest, version string) bool {
	if d.rawMeta == nil || d.meta == nil {
		return false // the SDK refuses a call of these versions without them
	}
	if !jsonscan.UniqueMembers(d.rawMeta) {
		return false
	}
	if _, ok := d.meta["progressToken"]; ok {
		return false
	}
	for k := range d.meta {
		switch k {
		case mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, mcp.MetaKeyClientInfo, mcp.MetaKeyLogLevel:
		default:
			if strings.HasPrefix(k, protocolMetaPrefix) {
				return false
			}
		}
	}
	if v, ok := d.meta[mcp.MetaKeyProtocolVersion].(string); !ok || v != version {
		return false
	}
	var caps struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if c, ok := d.meta[mcp.MetaKeyClientCapabilities].(map[string]any); !ok || !remarshals(c, &caps) {
		return false
	}
	if info, present := d.meta[mcp.MetaKeyClientInfo]; present {
		var impl *mcp.Implementation
		if info == nil || !remarshals(info, &impl) {
			return false
		}
	}
	return true
}

// remarshals reports whether from, JSON decoded, decodes into to.
func remarshals(from, to any) bool {
	raw, err := json.Marshal(from)
	return err == nil && json.Unmarshal(raw, to) == nil
}

// serveStateless runs a stateless call through Config.StatelessCall and
// writes its answer.
func (p *Path) serveStateless(w http.ResponseWriter, r *http.Request, d directRequest) {
	res, err := p.cfg.StatelessCall(r.Context(), &mcp.CallToolParamsRaw{Name: d.name, Arguments: d.args, Meta: d.meta},
		&mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
	if err == nil && res != nil && (res.NeedsInput() || res.InputRequests != nil || res.RequestState != "") {
		// Config.StatelessTools keeps the tools that can ask off this
		// path; an upstream's input request is not relayed.
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call needs input the gateway cannot ask for on this request"}
	}
	var out []byte
	if err == nil {
		var raw []byte
		if raw, err = p.encodeStatelessResult(res); err == nil {
			// resultType is the last member of the SDK's encoding.
			raw = append(raw[:len(raw)-1], `,"resultType":"complete"}`...)
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
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// encodeStatelessResult is encodeToolResult of statelessResult(res). A
// result without _meta gets the one of the server's implementation as New
// encoded it, not encoded again for every call.
func (p *Path) encodeStatelessResult(res *mcp.CallToolResult) ([]byte, error) {
	if p.serverInfoMeta == nil || (res != nil && (len(res.Meta) > 0 || !commonResult(res))) {
		return encodeToolResult(p.statelessResult(res))
	}
	var c mcp.CallToolResult
	if res != nil {
		c = *res
	}
	if c.Content == nil {
		c.Content = []mcp.Content{}
	}
	return encodeCommonResult(&c, p.serverInfoMeta)
}

// statelessResult is res as the SDK's stateless server sends it: content
// never null, and the server's implementation in _meta (SEP-2575) unless
// the result names one.
func (p *Path) statelessResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	var c mcp.CallToolResult
	if res != nil {
		c = *res
	}
	if c.Content == nil {
		c.Content = []mcp.Content{}
	}
	if p.cfg.ServerInfo != nil {
		if _, ok := c.Meta[mcp.MetaKeyServerInfo]; !ok {
			meta := make(mcp.Meta, len(c.Meta)+1)
			for k, v := range c.Meta {
				meta[k] = v
			}
			meta[mcp.MetaKeyServerInfo] = p.cfg.ServerInfo
			c.Meta = meta
		}
	}
	return &c
}

// StatelessCaller runs a stateless tool call as the stateless front's
// server would have handed it to the gateway.
type StatelessCaller func(ctx context.Context, params *mcp.CallToolParamsRaw, extra *mcp.RequestExtra) (*mcp.CallToolResult, error)
