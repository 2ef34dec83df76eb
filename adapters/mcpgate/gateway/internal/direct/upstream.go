package direct

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrTooLarge is why a message of the upstream was not read: it is larger
// than the bound (Config.MaxMessageBytes).
var ErrTooLarge = errors.New("gateway: upstream message larger than the bound")

// errSessionLost is why a direct call failed when the upstream no longer
// knows the session (HTTP 404): the link connects a new one.
var errSessionLost = errors.New("the upstream no longer knows the session")

// wireMessage is any JSON-RPC message, as readMessage reads it.
type wireMessage struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// Version is the protocol version of cs when its calls may take the direct path.
//
// It is "" otherwise: cs is not connected over streamable HTTP, or on a
// protocol version without sessions. An upstream that gave no session id
// (a go-sdk server with StreamableHTTPOptions.Stateless, say) is sent
// none, as the SDK's client sends none.
func (p *Path) Version(cs *mcp.ClientSession) string {
	if p.cfg.URL == "" || p.cfg.HTTPClient == nil {
		return ""
	}
	ir := cs.InitializeResult()
	if ir == nil || ir.ProtocolVersion == "" || ir.ProtocolVersion >= "2026-07-28" {
		return "" // the stateless protocol: per-request _meta and headers, the SDK's
	}
	return ir.ProtocolVersion
}

// StatelessVersion is the protocol version of cs when it is of MCP
// 2026-07-28 (no session: each request on its own) and a call on it may
// take the direct path to the upstream, or "": cs is connected over
// streamable HTTP without a session id, on exactly that version.
func (p *Path) StatelessVersion(cs *mcp.ClientSession) string {
	if p.cfg.URL == "" || p.cfg.HTTPClient == nil || cs.ID() != "" {
		return ""
	}
	ir := cs.InitializeResult()
	if ir == nil || ir.ProtocolVersion != statelessVersion {
		return "" // a later version may read or write differently: the SDK's
	}
	return ir.ProtocolVersion
}

// statelessVersion is the one stateless protocol version whose requests
// the direct path writes as the go-sdk's client does.
const statelessVersion = "2026-07-28"

// Upstream is the upstream session of a call.
type Upstream struct {
	// Session is the session, Version its protocol version (p.Version,
	// or p.StatelessVersion with Stateless true).
	Session *mcp.ClientSession
	Version string
	// Stateless says the session is of MCP 2026-07-28: its requests carry
	// no session id but the Mcp-Method and Mcp-Name headers, and the call's
	// params carry the protocol's _meta (protocol version, client
	// information and capabilities) as the SDK's client writes them: the
	// caller puts them in params.Meta.
	Stateless bool
	// Fail, if set, fails and closes the session as the SDK's client
	// fails its connection on an answer it cannot read: nothing more
	// (the cancellation of its subscriptions/listen, say) is sent on it.
	// The link then connects a new session. Nil: Session.Close.
	Fail func()
	// Peer takes the upstream's messages on the call's stream.
	Peer Peer
	// Life ends when the session is no longer the gateway's: the
	// cancellation of a call sent after it returned ends with it.
	Life context.Context
}

// Call calls the tool on the upstream session with one POST.
//
// It reads the answer: a JSON body, or an event stream on which the
// upstream may also send notifications and requests of its own before it
// answers (handed to up.Peer). ctx is the call's, bounded by WithCallTimeout; the HTTP request has a
// context of its own, so that after the answer the rest of the stream can
// be drained in the background (drain) and the connection kept.
func (p *Path) Call(ctx context.Context, up Upstream, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	cs := up.Session
	id := "axgate-" + strconv.FormatUint(p.seq.Add(1), 10)
	body, err := encodeCall(id, params)
	if err != nil {
		return nil, err
	}
	// The HTTP request's own context: cancelled with ctx while the call
	// runs, but not when it returns, so that the rest of an event stream
	// can still be read (drain) and the connection kept. When the client
	// gives up, or the call's time runs out, before the answer, the
	// upstream is told, as the SDK's client tells it.
	reqCtx, cancelReq := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		cancelReq(context.Cause(ctx))
		// Counted with the drains: an upstream that holds these POSTs
		// open does not get one held per cancelled call.
		if !p.cfg.Drains.Take() {
			return
		}
		go func() {
			defer p.cfg.Drains.Done()
			p.cancelUpstream(up.Life, up.headers(""), id)
		}()
	})
	var res *mcp.CallToolResult
	draining := false
	resp, err := p.post(reqCtx, up.headers(params.Name), body)
	if err == nil {
		res, draining, err = p.readAnswer(ctx, up, id, resp, cancelReq)
	}
	if err == nil || ctx.Err() == nil {
		stop()
	}
	if !draining {
		cancelReq(nil)
	}
	switch {
	case errors.Is(err, errSessionLost):
		cs.Close() // the link connects a new session
	case cs.ID() == "" && failsConnection(ctx, err):
		if up.Fail != nil {
			up.Fail()
		} else {
			cs.Close()
		}
	}
	return res, err
}

// failsConnection reports whether the SDK's client would have failed its
// connection on a call to an upstream without a session id that failed
// with err: not for the upstream's JSON-RPC error, an HTTP status it takes
// as passing, a multi-round-trip result or a cancelled call; for any
// other answer it could not read (a status, a body too large or not
// JSON-RPC, an event stream that ended).
func failsConnection(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	var re *jsonrpc.Error
	var ir *InputRequired
	return err != nil && ctx.Err() == nil && !errors.As(err, &re) && !errors.Is(err, errPassing) && !errors.As(err, &ir)
}

// postHeaders are the headers of a POST to the upstream that depend on
// the session and the message.
type postHeaders struct {
	sessionID, version string
	// stateless: a session of MCP 2026-07-28.
	stateless bool
	// name is the tool of a tools/call; "" for any other message (only a
	// stateless request's headers name it).
	name string
	// method is the method of a stateless request or notification ("" for
	// a response).
	method string
}

// headers are the headers of up's tools/call of the tool name; with name
// "", of a message that is not a call.
func (up Upstream) headers(name string) postHeaders {
	h := postHeaders{version: up.Version, stateless: up.Stateless, name: name}
	if !up.Stateless {
		h.sessionID = up.Session.ID()
	} else if name != "" {
		h.method = "tools/call"
	}
	return h
}

// encodeCall is the tools/call request id with params, as json.Marshal
// writes it (TestEncodeCall), without reflection: params' arguments are
// the checked arguments' canonical encoding already.
func encodeCall(id string, params *mcp.CallToolParams) ([]byte, error) {
	args, ok := params.Arguments.(json.RawMessage)
	if !ok {
		return json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			ID      string `json:"id"`
			Method  string `json:"method"`
			Params  any    `json:"params"`
		}{"2.0", id, "tools/call", params})
	}
	out := make([]byte, 0, 96+len(id)+len(params.Name)+len(args))
	out, err := jsonscan.AppendString(append(out, `{"jsonrpc":"2.0","id":`...), id)
	if err != nil {
		return nil, err
	}
	out = append(out, `,"method":"tools/call","params":{`...)
	if len(params.Meta) > 0 {
		meta, err := json.Marshal(params.Meta)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, `"_meta":`...), meta...), ',')
	}
	if out, err = jsonscan.AppendString(append(out, `"name":`...), params.Name); err != nil {
		return nil, err
	}
	out = append(out, `,"arguments":`...)
	if len(args) == 0 {
		out = append(out, "null"...)
	} else {
		// Compacted onto out itself, not into a buffer of its own.
		buf := bytes.NewBuffer(out)
		if err := json.Compact(buf, args); err != nil {
			return nil, err
		}
		out = buf.Bytes()
	}
	return append(out, "}}"...), nil
}

// post sends one JSON-RPC message on the upstream session and returns the
// upstream's response, status 200 (or 202 for a message that is not a
// request), with its body bounded by WithMaxMessageBytes.
//
// The headers are the go-sdk client's: a session's id (none when the
// upstream gave none) and version; or, on a stateless version, the
// version, the method (Mcp-Method) and a call's tool name (Mcp-Name).
func (p *Path) post(ctx context.Context, h postHeaders, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// The keys are in their canonical form already (Header.Set would
	// canonicalize them again on every call).
	req.Header["Content-Type"] = jsonContentType
	req.Header["Accept"] = acceptBoth
	req.Header[headerProtocolVersion] = []string{h.version}
	if h.stateless {
		if h.method != "" {
			req.Header[headerMcpMethod] = []string{h.method}
		}
		if h.name != "" {
			req.Header[headerMcpName] = []string{h.name}
		}
	} else if h.sessionID != "" {
		req.Header[headerSessionID] = []string{h.sessionID}
	}
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	if err := p.statusError(resp); err != nil {
		return nil, err
	}
	p.cfg.Bound(resp)
	return resp, nil
}

// statusError is what an answer of the upstream with a status other than
// 200 and 202 means, in the order the SDK's client reads it: 429, 500, 502,
// 503 and 504 are passing (the upstream is unavailable for now); otherwise
// a JSON-RPC error in the body is the upstream's answer; a 404 is a session
// the upstream no longer knows; anything else, a failure.
func (p *Path) statusError(resp *http.Response) error {
	switch code := resp.StatusCode; code {
	case http.StatusOK, http.StatusAccepted:
		return nil
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		discard(resp)
		return fmt.Errorf("%w: the upstream answered HTTP %d", errPassing, code)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxMessageBytes))
	if err == nil {
		if m, err := readMessage(raw); err == nil && m.Method == "" && m.ID != nil && m.Error != nil {
			return m.Error
		}
	}
	if resp.StatusCode == http.StatusNotFound {
		return errSessionLost
	}
	return fmt.Errorf("the upstream answered HTTP %d", resp.StatusCode)
}

// errPassing is why a call failed on an HTTP status the SDK's client takes
// as passing (429, 500, 502, 503, 504).
var errPassing = errors.New("the upstream is unavailable for now")

// InputRequired is the error of a call answered with a multi-round-trip result.
//
// The upstream's result has inputRequests (MCP 2026-07-28); nothing of it
// was used. Result is the result as the upstream sent it, for the SDK's
// client to take up as its own answer to the call (its multi-round-trip
// handling fulfils the requests and calls again).
type InputRequired struct{ Result json.RawMessage }

func (e *InputRequired) Error() string { return "the upstream asked for input (inputRequests)" }

var (
	jsonContentType = []string{"application/json"}
	acceptBoth      = []string{"application/json, text/event-stream"}
)

// discard reads a little of a response that is not used, so that its
// connection can be kept, and closes it.
func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// readAnswer reads the answer to request id from resp. draining reports
// that the rest of resp is read in the background, which calls end when it
// is done.
func (p *Path) readAnswer(ctx context.Context, up Upstream, id string, resp *http.Response, end context.CancelCauseFunc) (_ *mcp.CallToolResult, draining bool, _ error) {
	mt, _ := MediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, false, err
		}
		m, err := readMessage(raw)
		if err != nil {
			return nil, false, err
		}
		if !isAnswerTo(m, id) {
			return nil, false, errors.New("the upstream answered another request")
		}
		res, err := up.toolAnswer(m)
		return res, false, err
	case "text/event-stream":
		events := newEventReader(resp.Body)
		defer events.release()
		events.limit = p.cfg.MaxMessageBytes
		for {
			data, err := events.next()
			if err != nil {
				resp.Body.Close()
				if errors.Is(err, io.EOF) {
					err = errors.New("the upstream's event stream ended without the answer")
				}
				return nil, false, err
			}
			m, err := readMessage(data)
			if err != nil {
				resp.Body.Close()
				return nil, false, err
			}
			switch {
			case isAnswerTo(m, id):
				res, err := up.toolAnswer(m)
				if !p.cfg.Drains.Take() {
					// An upstream that keeps its streams open after the
					// answer: its connections are closed, not kept, so that
					// calls cannot pile them up for DrainFor each.
					resp.Body.Close()
					return res, false, err
				}
				go func() {
					defer p.cfg.Drains.Done()
					drain(resp.Body, end)
				}()
				return res, true, err
			case m.Method != "" && m.ID == nil:
				up.Peer.Notify(ctx, m.Method, m.Params)
			case m.Method != "":
				// One at a time, before the stream is read on: the upstream
				// waits for the answer before it answers the call, and a
				// flood of requests holds no more than this reader.
				p.answerUpstream(ctx, up, m)
			}
			// A response to another request: not this call's.
		}
	}
	discard(resp)
	return nil, false, fmt.Errorf("the upstream answered with content type %q", mt)
}

// drain reads the rest of an event stream (the SDK's servers close it after
// the answer), so that its connection is kept, and then ends the request's
// context; an upstream that keeps the stream open loses the connection
// after DrainFor.
func drain(body io.ReadCloser, end context.CancelCauseFunc) {
	t := time.AfterFunc(DrainFor, func() { end(nil) })
	io.Copy(io.Discard, body)
	t.Stop()
	body.Close()
	end(nil)
}

// errNotJSONRPC is why a message of the upstream was not read.
var errNotJSONRPC = errors.New("the upstream sent a message that is not a JSON-RPC message")

// readMessage reads a JSON-RPC message as the go-sdk's client reads it: a
// message without "jsonrpc": "2.0", or nested deeper than the go-sdk reads
// (jsonscan.TooDeep), is not one, and an "error" of null is no error. Its params and result stay
// undecoded (the data of an event is reused: they are copied).
func readMessage(data []byte) (wireMessage, error) {
	var m wireMessage
	bad := errNotJSONRPC
	if !json.Valid(data) || jsonscan.TooDeep(data) {
		return m, bad
	}
	var errRaw []byte
	version := false
	if !jsonscan.Members(data, func(k, v []byte) bool {
		switch string(k) {
		case "jsonrpc":
			if string(v) == `"2.0"` { // as written, without decoding it
				version = true
				return true
			}
			tag, ok := jsonscan.String(v)
			version = ok && tag == "2.0"
			return ok
		case "id":
			m.ID = bytes.Clone(v)
		case "method":
			var ok bool
			m.Method, ok = jsonscan.String(v)
			return ok
		case "params":
			m.Params = bytes.Clone(v)
		case "result":
			m.Result = bytes.Clone(v)
		case "error":
			errRaw = v
		}
		return true
	}) || !version {
		return m, bad
	}
	if errRaw != nil && string(errRaw) != "null" {
		m.Error = new(jsonrpc.Error)
		if err := json.Unmarshal(errRaw, m.Error); err != nil {
			return m, bad
		}
	}
	return m, nil
}

// isAnswerTo reports whether m is the response to request id.
func isAnswerTo(m wireMessage, id string) bool {
	if m.Method != "" {
		return false
	}
	if n := len(m.ID); n == len(id)+2 && m.ID[0] == '"' && m.ID[n-1] == '"' && string(m.ID[1:n-1]) == id {
		return true // as written, without decoding it
	}
	got, ok := jsonscan.String(m.ID)
	return ok && got == id
}

// toolAnswer is the result, or the JSON-RPC error, of a response; on a
// session without an id (stateless, or an upstream that gave none), a
// result with inputRequests is *InputRequired, as the SDK's client hands
// such a result to its multi-round-trip handling.
func (up Upstream) toolAnswer(m wireMessage) (*mcp.CallToolResult, error) {
	res, err := toolAnswer(m)
	if err == nil && up.Session.ID() == "" && res.InputRequests != nil {
		return nil, &InputRequired{Result: m.Result}
	}
	return res, err
}

// toolAnswer is the result, or the JSON-RPC error, of a response.
func toolAnswer(m wireMessage) (*mcp.CallToolResult, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	if len(m.Result) == 0 || string(m.Result) == "null" {
		return nil, errors.New("the upstream's response has no result")
	}
	return decodeToolResult(m.Result)
}

// decodeToolResult decodes a CallToolResult. The common one (text blocks,
// structuredContent, isError, _meta, each written once) is decoded here;
// any other is decoded by the SDK's own types.
func decodeToolResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if res, ok := decodeCommonResult(raw); ok {
		return res, nil
	}
	res := new(mcp.CallToolResult)
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, fmt.Errorf("the upstream's result is not a tool result: %w", err)
	}
	return res, nil
}

func decodeCommonResult(raw json.RawMessage) (*mcp.CallToolResult, bool) {
	res := &mcp.CallToolResult{}
	var seen [4]bool
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok := jsonscan.Members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "content":
			if !once(0) {
				return false
			}
			res.Content = []mcp.Content{}
			return jsonscan.Elements(v, func(e []byte) bool {
				tc, ok := textContent(e)
				res.Content = append(res.Content, tc)
				return ok
			})
		case "structuredContent":
			if !once(1) {
				return false
			}
			if string(v) == "null" {
				return true
			}
			return json.Unmarshal(v, &res.StructuredContent) == nil
		case "isError":
			res.IsError = string(v) == "true"
			return once(2) && (res.IsError || string(v) == "false")
		case "_meta":
			return once(3) && (string(v) == "null" || json.Unmarshal(v, &res.Meta) == nil)
		}
		return false
	})
	return res, ok && seen[0]
}

// textContent decodes a text block with nothing but its type and text.
func textContent(raw []byte) (*mcp.TextContent, bool) {
	var typ, text string
	var okType, okText bool
	ok := jsonscan.Members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			if okType {
				return false
			}
			if string(v) == `"text"` { // as written, without decoding it
				okType = true
				return true
			}
			typ, okType = jsonscan.String(v)
			return okType && typ == "text"
		case "text":
			if okText {
				return false
			}
			text, okText = jsonscan.String(v)
			return okText
		}
		return false
	})
	return &mcp.TextContent{Text: text}, ok && okType && okText
}

// answerUpstream sends the upstream the Peer's answer to a request it sent
// on a call's stream.
func (p *Path) answerUpstream(ctx context.Context, up Upstream, m wireMessage) {
	result, err := up.Peer.Answer(ctx, m.Method, m.Params)
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: m.ID, Result: result}
	if err != nil {
		if !errors.As(err, &msg.Error) {
			msg.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		msg.Result = nil
	}
	body, merr := json.Marshal(msg)
	if merr != nil {
		return
	}
	if resp, err := p.post(ctx, up.headers(""), body); err == nil {
		discard(resp)
	}
}

// cancelUpstream tells the upstream that request id is cancelled: on a
// session without an id with the SDK client's reason, and on a stateless
// one with its Mcp-Method header.
func (p *Path) cancelUpstream(life context.Context, h postHeaders, id string) {
	ctx, cancel := context.WithTimeout(life, 5*time.Second)
	defer cancel()
	reason := "the client cancelled the call"
	if h.stateless || h.sessionID == "" {
		// As the SDK's client words it: its call's context's error, which
		// is always this for the gateway's calls (upstreamContext).
		reason = context.Canceled.Error()
	}
	if h.stateless {
		h.method = "notifications/cancelled"
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": reason},
	})
	if resp, err := p.post(ctx, h, body); err == nil {
		discard(resp)
	}
}

// eventReader reads the data of the events of a server-sent event stream
// (the message events: those with no event type, or "message") as the
// go-sdk's client scans them: lines end with LF, less every CR and LF at
// their end; a line without a colon is malformed; a field's value is
// trimmed of spaces; an event the stream ends in is read.
type eventReader struct {
	r    *bufio.Reader
	data []byte
	typ  []byte
	line []byte
	// limit bounds an event's data (0: unbounded). boundedBody bounds the
	// bytes between blank lines as it sees them; the bound is kept here
	// as well.
	limit int64
	// eof: the stream ended (after the event next returned last).
	eof bool
}

// eventReaders keeps the readers of finished streams, with their buffers.
var eventReaders = sync.Pool{New: func() any { return &eventReader{r: bufio.NewReaderSize(nil, 4096)} }}

func newEventReader(r io.Reader) *eventReader {
	e := eventReaders.Get().(*eventReader)
	e.r.Reset(r)
	return e
}

// release gives e back for another stream, unless an event made its
// buffers large. The data next returned is not to be used after it.
func (e *eventReader) release() {
	e.r.Reset(nil)
	e.limit, e.eof = 0, false
	if cap(e.data) > 64<<10 || cap(e.line) > 64<<10 {
		return
	}
	e.data, e.typ, e.line = e.data[:0], e.typ[:0], e.line[:0]
	eventReaders.Put(e)
}

// next returns the data of the next message event, or ErrTooLarge
// when an event's data is longer than limit, or errMalformedEvent.
func (e *eventReader) next() ([]byte, error) {
	e.data, e.typ = e.data[:0], e.typ[:0]
	hasData := false
	for {
		if e.eof {
			return nil, io.EOF
		}
		line, err := e.readLine()
		if errors.Is(err, io.EOF) {
			e.eof = true // the line read so far is the last one
		} else if err != nil {
			return nil, err
		}
		if len(line) == 0 || e.eof {
			if len(line) > 0 {
				if err := e.field(line, &hasData); err != nil {
					return nil, err
				}
			}
			// The end of an event. One with empty data (the priming
			// event of SEP-1699, which carries only an id) is not a
			// message, as the SDK's client reads it.
			if hasData && len(e.data) > 0 && (len(e.typ) == 0 || string(e.typ) == "message") {
				return e.data, nil
			}
			e.data, e.typ, hasData = e.data[:0], e.typ[:0], false
			continue
		}
		if err := e.field(line, &hasData); err != nil {
			return nil, err
		}
	}
}

// errMalformedEvent is why an event stream was not read on: a line
// without a colon, which the go-sdk's client fails its connection on.
var errMalformedEvent = errors.New("the upstream's event stream has a malformed line")

// field takes one line of an event: its data (after an earlier data line,
// on a line of its own) or its type; "id", "retry" and comments (an empty
// field) are not used.
func (e *eventReader) field(line []byte, hasData *bool) error {
	field, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return errMalformedEvent
	}
	value = bytes.TrimSpace(value)
	switch string(field) {
	case "data":
		if *hasData {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, value...)
		*hasData = true
		if e.limit > 0 && int64(len(e.data)) > e.limit {
			return ErrTooLarge
		}
	case "event":
		e.typ = append(e.typ[:0], value...)
	}
	return nil
}

// readLine reads one line without the CRs and LFs at its end; io.EOF
// with the last line when the stream ends.
func (e *eventReader) readLine() ([]byte, error) {
	e.line = e.line[:0]
	for {
		chunk, err := e.r.ReadSlice('\n')
		e.line = append(e.line, chunk...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(e.line, "\r\n"), err
	}
	return bytes.TrimRight(e.line, "\r\n"), nil
}
