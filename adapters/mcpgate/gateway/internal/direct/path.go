package direct

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is the direct path: Handler answers the common tools/call of a
// client session, Stateless the common one of MCP 2026-07-28 (no session),
// Call sends a call to an HTTP upstream in one POST.
type Path struct {
	cfg Config
	seq atomic.Uint64 // numbers the requests to the upstream

	// serverInfoMeta is the _meta the stateless front adds to a result
	// without one, as the SDK encodes it: {serverInfo: Config.ServerInfo}
	// (nil without a ServerInfo, or when it cannot be encoded).
	serverInfoMeta []byte
	// metaSeen is the last _meta of a stateless call that statelessMeta
	// accepted, with its protocol version: an agent writes the same one on
	// every request, and the check is a function of these bytes alone.
	metaSeen atomic.Pointer[seenMeta]
	// metaDecoded is the last _meta of a call decoded (decodeMeta).
	metaDecoded atomic.Pointer[decodedMeta]
}

// seenMeta is a stateless call's _meta as written, and its version.
type seenMeta struct {
	version string
	raw     []byte
}

// New returns the direct path configured by cfg.
func New(cfg Config) *Path {
	p := &Path{cfg: cfg}
	if cfg.ServerInfo != nil {
		if raw, err := json.Marshal(mcp.Meta{mcp.MetaKeyServerInfo: cfg.ServerInfo}); err == nil {
			p.serverInfoMeta = raw
		}
	}
	return p
}

// Config is what the direct path needs of the gateway.
type Config struct {
	// Sessions finds the client sessions by their streamable HTTP id.
	Sessions Sessions
	// Tools are the tools whose calls may take the direct path: those
	// whose chain cannot ask the person through the client.
	Tools map[string]bool
	// SessionTimeout and CallTimeout are the gateway's WithSessionTimeout
	// and WithCallTimeout.
	SessionTimeout, CallTimeout time.Duration
	// Body is the body of a POST read already, within the bound, when
	// nothing of it has been read since; ok false otherwise.
	Body func(r *http.Request) (body []byte, ok bool)

	// URL and HTTPClient reach the upstream. Bound bounds the body of
	// each of its responses, a message at most MaxMessageBytes; an event
	// of its streams is bounded by MaxMessageBytes here as well.
	URL             string
	HTTPClient      *http.Client
	MaxMessageBytes int64
	Bound           func(resp *http.Response)
	// Drains counts the upstream work after a call returned, with the
	// gateway's own.
	Drains *Drains

	// StatelessVersions are the protocol versions of the stateless front
	// (Stateless); StatelessTools the tools whose calls on it may take the
	// direct path: those of Tools whose definition has no parameter the
	// SDK compares with an Mcp-Param-* header. StatelessCall runs such a
	// call (nil: none takes the direct path). ServerInfo is the front's
	// implementation, which the SDK names in each result's _meta.
	StatelessVersions []string
	StatelessTools    map[string]bool
	StatelessCall     StatelessCaller
	ServerInfo        *mcp.Implementation
}

// Sessions finds client sessions.
type Sessions interface {
	// Lookup returns the session with that id, or nil.
	Lookup(id string) Session
}

// Session is a client session of the gateway's streamable HTTP handler.
type Session interface {
	// State is the direct path's record of the session.
	State() *State
	// Initialized reports whether the session's initialize was answered.
	Initialized() bool
	// Ready reports whether the session's upstream is connected, waiting
	// at most within for it.
	Ready(ctx context.Context, within time.Duration) bool
	// CallTool runs a call as the SDK's server would have handed it to
	// the gateway.
	CallTool(ctx context.Context, params *mcp.CallToolParamsRaw, extra *mcp.RequestExtra) (*mcp.CallToolResult, error)
}

// State is the direct path's record of a client session: the user that
// started it, the protocol version it agreed on, when the SDK last saw a
// POST of it, and its direct calls in flight. The zero State is of a
// session not registered yet, whose calls go to the SDK.
type State struct {
	userID   string
	version  string
	lastPOST atomic.Int64 // UnixNano

	// inflight are the session's direct calls in flight, by requestKey of
	// their JSON-RPC id: to refuse an id already in flight, as the SDK
	// does, and to cancel a call on the client's notifications/cancelled,
	// which goes to the SDK (it cancels only its own calls). inflightN
	// counts them, so that a POST of a session with none is not read for
	// a cancellation.
	inflightMu sync.Mutex
	inflight   map[string]context.CancelFunc
	inflightN  atomic.Int32
}

// Peer takes the messages the upstream sends on a call's stream before it
// answers, as the SDK's client would have handed them to the gateway.
type Peer interface {
	// Notify takes a notification.
	Notify(ctx context.Context, method string, params json.RawMessage)
	// Answer answers a request: its result, or an error (a
	// *jsonrpc.Error is sent as it is).
	Answer(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Drains bounds the upstream work done after a call returned: the event
// streams read on after their answer, to keep their connections, the
// cancellations sent, and the gateway's own (its go-sdk calls' responses).
type Drains struct{ n atomic.Int64 }

// maxDraining bounds Drains. Beyond it, a connection is closed instead of
// kept, and a cancellation is not sent (the call's request is cancelled
// all the same).
const maxDraining = 256

// DrainFor bounds how long the upstream's HTTP response may still be read
// after its answer arrived.
const DrainFor = 10 * time.Second

// Take counts one more, unless the bound is reached.
func (d *Drains) Take() bool {
	if d.n.Add(1) > maxDraining {
		d.n.Add(-1)
		return false
	}
	return true
}

// Done counts one less.
func (d *Drains) Done() { d.n.Add(-1) }
