// Package direct answers the gateway's common tools/call without the go-sdk.
//
// It answers as the go-sdk's server and client would, byte for byte. Its one entry point is a Path (New): Handler reads a tools/call POST on
// an established streamable HTTP session of a tool whose chain cannot ask
// the person, with nothing but name, arguments and _meta in its params and
// no progress token, runs it through the Session's CallTool and writes one
// JSON body; every other request, and every request the SDK would not take
// as it stands (headers, protocol version, the session's user, a session
// near its idle timeout), goes to the SDK's handler unchanged. Stateless
// does the same for a tools/call of MCP 2026-07-28 and later, which has no
// session: the per-request protocol version, client capabilities and
// information in _meta, and the Mcp-Method and Mcp-Name headers, checked
// as the SDK's stateless handler checks them, the call run through
// Config.StatelessCall, the result encoded as that handler encodes it on
// those versions. Call, used
// by the gateway's forwarding of every call, sends the call to an HTTP
// upstream session in one POST and reads its answer, a JSON body or an
// event stream, handing the upstream's own messages on it to a Peer; to
// an upstream without a session id (on 2025-11-25, or of MCP 2026-07-28:
// StatelessVersion, with the protocol's _meta and headers as the SDK's
// client writes them) too, a multi-round-trip answer left to that client
// (InputRequired).
//
// The gateway's TestDirectConformance replays its cases through the
// gateway with and without this package and compares the answers exactly.
package direct
