package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errSessionLost is why a direct call failed when the upstream no longer
// knows the session (HTTP 404): the link connects a new one.
var errSessionLost = errors.New("the upstream no longer knows the session")

// directVersion is the protocol version of cs when a call on it may take
// the direct path to the upstream (see direct.go), or "".
func (l *link) directVersion(cs *mcp.ClientSession) string {
	if l.g.cfg.sdkOnly || l.g.up.URL == "" || l.g.up.HTTPClient == nil || cs.ID() == "" {
		return ""
	}
	ir := cs.InitializeResult()
	if ir == nil || ir.ProtocolVersion == "" || ir.ProtocolVersion >= "2026-07-28" {
		return "" // the stateless protocol: per-request _meta and headers, the SDK's
	}
	return ir.ProtocolVersion
}

// wireMessage is any JSON-RPC message, as readMessage reads it.
type wireMessage struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// callDirect calls the tool on the upstream session cs with one POST, and
// reads the answer: a JSON body, or an event stream on which the upstream
// may also send notifications and requests of its own before it answers.
// ctx is the call's, bounded by WithCallTimeout; the HTTP request has a
// context of its own, so that after the answer the rest of the stream can
// be drained in the background (drain) and the connection kept.
func (l *link) callDirect(ctx context.Context, cs *mcp.ClientSession, version string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	g := l.g
	id := "axgate-" + strconv.FormatUint(g.directSeq.Add(1), 10)
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
		if g.draining.Add(1) > maxDraining {
			g.draining.Add(-1)
			return
		}
		go func() {
			defer g.draining.Add(-1)
			l.cancelUpstream(cs.ID(), version, id)
		}()
	})
	var res *mcp.CallToolResult
	draining := false
	resp, err := l.post(reqCtx, cs.ID(), version, body)
	if err == nil {
		res, draining, err = l.readAnswer(ctx, cs, version, id, resp, cancelReq)
	}
	if err == nil || ctx.Err() == nil {
		stop()
	}
	if !draining {
		cancelReq(nil)
	}
	if errors.Is(err, errSessionLost) {
		cs.Close() // the link connects a new session
	}
	return res, err
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
	name, err := json.Marshal(params.Name)
	if err != nil {
		return nil, err
	}
	quotedID, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 96+len(name)+len(args))
	out = append(append(out, `{"jsonrpc":"2.0","id":`...), quotedID...)
	out = append(out, `,"method":"tools/call","params":{`...)
	if len(params.Meta) > 0 {
		meta, err := json.Marshal(params.Meta)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, `"_meta":`...), meta...), ',')
	}
	out = append(append(out, `"name":`...), name...)
	out = append(out, `,"arguments":`...)
	if len(args) == 0 {
		out = append(out, "null"...)
	} else {
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return nil, err
		}
		out = append(out, compact.Bytes()...)
	}
	return append(out, "}}"...), nil
}

// post sends one JSON-RPC message on the upstream session and returns the
// upstream's response, status 200 (or 202 for a message that is not a
// request), with its body bounded by WithMaxMessageBytes.
func (l *link) post(ctx context.Context, sessionID, version string, body []byte) (*http.Response, error) {
	g := l.g
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.up.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// The keys are in their canonical form already (Header.Set would
	// canonicalize them again on every call).
	req.Header["Content-Type"] = jsonContentType
	req.Header["Accept"] = acceptBoth
	req.Header[headerProtocolVersion] = []string{version}
	req.Header[headerSessionID] = []string{sessionID}
	resp, err := g.up.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	if err := l.statusError(resp); err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &boundedBody{ReadCloser: resp.Body, limit: g.cfg.maxMessageBytes, cut: new(atomic.Bool), sse: mt == "text/event-stream"}
	return resp, nil
}

// statusError is what an answer of the upstream with a status other than
// 200 and 202 means, in the order the SDK's client reads it: 429, 500, 502,
// 503 and 504 are passing (the upstream is unavailable for now); otherwise
// a JSON-RPC error in the body is the upstream's answer; a 404 is a session
// the upstream no longer knows; anything else, a failure.
func (l *link) statusError(resp *http.Response) error {
	switch code := resp.StatusCode; code {
	case http.StatusOK, http.StatusAccepted:
		return nil
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		discard(resp)
		return fmt.Errorf("the upstream answered HTTP %d", code)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, l.g.cfg.maxMessageBytes))
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
func (l *link) readAnswer(ctx context.Context, cs *mcp.ClientSession, version, id string, resp *http.Response, end context.CancelCauseFunc) (_ *mcp.CallToolResult, draining bool, _ error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
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
		res, err := toolAnswer(m)
		return res, false, err
	case "text/event-stream":
		events := newEventReader(resp.Body)
		defer events.release()
		events.limit = l.g.cfg.maxMessageBytes
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
				res, err := toolAnswer(m)
				if l.g.draining.Add(1) > maxDraining {
					// An upstream that keeps its streams open after the
					// answer: its connections are closed, not kept, so that
					// calls cannot pile them up for upstreamDrain each.
					l.g.draining.Add(-1)
					resp.Body.Close()
					return res, false, err
				}
				go func() {
					defer l.g.draining.Add(-1)
					drain(resp.Body, end)
				}()
				return res, true, err
			case m.Method != "" && m.ID == nil:
				l.upstreamNotification(ctx, m.Method, m.Params)
			case m.Method != "":
				// One at a time, before the stream is read on: the upstream
				// waits for the answer before it answers the call, and a
				// flood of requests holds no more than this reader.
				l.answerUpstream(ctx, cs.ID(), version, m)
			}
			// A response to another request: not this call's.
		}
	}
	discard(resp)
	return nil, false, fmt.Errorf("the upstream answered with content type %q", mt)
}

// maxDraining bounds the upstream work the gateway does after a call
// returned: the event streams it reads on after their answer, to keep
// their connections (each at most upstreamDrain), and the cancellations it
// sends (each at most 5 s). Beyond it, a connection is closed instead of
// kept, and a cancellation is not sent (the call's request is cancelled
// all the same).
const maxDraining = 256

// drain reads the rest of an event stream (the SDK's servers close it after
// the answer), so that its connection is kept, and then ends the request's
// context; an upstream that keeps the stream open loses the connection
// after upstreamDrain.
func drain(body io.ReadCloser, end context.CancelCauseFunc) {
	t := time.AfterFunc(upstreamDrain, func() { end(nil) })
	io.Copy(io.Discard, body)
	t.Stop()
	body.Close()
	end(nil)
}

// readMessage reads a JSON-RPC message. Its params and result stay
// undecoded (the data of an event is reused: they are copied).
func readMessage(data []byte) (wireMessage, error) {
	var m wireMessage
	bad := errors.New("the upstream sent a message that is not a JSON-RPC message")
	if !json.Valid(data) {
		return m, bad
	}
	var errRaw []byte
	if !members(data, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			m.ID = bytes.Clone(v)
		case "method":
			var ok bool
			m.Method, ok = jsonString(v)
			return ok
		case "params":
			m.Params = bytes.Clone(v)
		case "result":
			m.Result = bytes.Clone(v)
		case "error":
			errRaw = v
		}
		return true
	}) {
		return m, bad
	}
	if errRaw != nil {
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
	got, ok := jsonString(m.ID)
	return ok && got == id
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
	ok := members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "content":
			if !once(0) {
				return false
			}
			res.Content = []mcp.Content{}
			return elements(v, func(e []byte) bool {
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
	ok := members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			if okType {
				return false
			}
			typ, okType = jsonString(v)
			return okType && typ == "text"
		case "text":
			if okText {
				return false
			}
			text, okText = jsonString(v)
			return okText
		}
		return false
	})
	return &mcp.TextContent{Text: text}, ok && okType && okText
}

// upstreamNotification hands a notification the upstream sent on a call's
// stream to the handler the SDK's client would have called (clientOptions).
func (l *link) upstreamNotification(ctx context.Context, method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		l.toolsChanged()
		return
	case "notifications/progress":
		notify[mcp.ProgressNotificationParams](ctx, l, method, params)
		return
	}
	if l.client == nil || l.g.cfg.toolsOnly {
		return
	}
	switch method {
	case "notifications/message":
		notify[mcp.LoggingMessageParams](ctx, l, method, params)
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if decodeParams(params, &p) == nil && l.passesNotification(method, p.URI) {
			toFront(ctx, l, method, &mcp.ResourceUpdatedNotificationParams{URI: p.URI})
		}
	case "notifications/resources/list_changed":
		if l.passesNotification(method, "") {
			notify[mcp.ResourceListChangedParams](ctx, l, method, params)
		}
	case "notifications/prompts/list_changed":
		if l.passesNotification(method, "") {
			notify[mcp.PromptListChangedParams](ctx, l, method, params)
		}
	case "notifications/elicitation/complete":
		var p mcp.ElicitationCompleteParams
		if l.forwards(methodElicit) && decodeParams(params, &p) == nil {
			l.client.NotifyElicitationComplete(ctx, &p)
		}
	}
}

func notify[T any, P interface {
	*T
	mcp.Params
}](ctx context.Context, l *link, method string, params json.RawMessage) {
	p := P(new(T))
	if decodeParams(params, p) == nil {
		toFront(ctx, l, method, p)
	}
}

func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// answerUpstream answers a request the upstream sent on a call's stream as
// the SDK's client would (clientOptions, receiveAsks): ping; elicitation,
// sampling and the client's roots forwarded to the client session when the
// operator allows it and the client offers it, within
// WithMaxPendingUpstreamRequests, and refused otherwise; the operator's
// roots; anything else is not found.
func (l *link) answerUpstream(ctx context.Context, sessionID, version string, m wireMessage) {
	result, err := l.upstreamRequest(ctx, m.Method, m.Params)
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
	if resp, err := l.post(ctx, sessionID, version, body); err == nil {
		discard(resp)
	}
}

func (l *link) upstreamRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "ping":
		return struct{}{}, nil
	case methodElicit:
		if !l.forwards(method) {
			return nil, l.refuseAsk(method)
		}
		var p mcp.ElicitParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.Elicit(ctx, &p) })
	case methodCreateMessage:
		if !l.forwards(method) {
			return nil, l.refuseAsk(method)
		}
		var p mcp.CreateMessageParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.CreateMessage(ctx, &p) })
	case methodListRoots:
		if !l.forwards(method) {
			return l.g.operatorRoots(), nil
		}
		var p mcp.ListRootsParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.ListRoots(ctx, &p) })
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// pending runs do within the bound of the upstream's requests to the
// client that may wait at once.
func pending(ctx context.Context, l *link, do func(context.Context) (any, error)) (any, error) {
	if !l.pending.take() {
		return nil, errTooManyPending
	}
	defer l.pending.put()
	ctx, stop := l.whileOpen(ctx)
	defer stop()
	return do(ctx)
}

// cancelUpstream tells the upstream that request id is cancelled.
func (l *link) cancelUpstream(sessionID, version, id string) {
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": "the client cancelled the call"},
	})
	if resp, err := l.post(ctx, sessionID, version, body); err == nil {
		discard(resp)
	}
}

// eventReader reads the data of the events of a server-sent event stream
// (the message events: those with no event type, or "message"). Lines end
// with LF or CRLF.
type eventReader struct {
	r    *bufio.Reader
	data []byte
	typ  []byte
	line []byte
	// limit bounds an event's data (0: unbounded). boundedBody bounds the
	// bytes between blank lines as it sees them, which is not quite where
	// this reader ends an event (a line of a lone CR is a field here, and
	// a blank line there): the bound is kept here as well.
	limit int64
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
	e.limit = 0
	if cap(e.data) > 64<<10 || cap(e.line) > 64<<10 {
		return
	}
	e.data, e.typ, e.line = e.data[:0], e.typ[:0], e.line[:0]
	eventReaders.Put(e)
}

// next returns the data of the next message event, or errMessageTooLarge
// when an event's data is longer than limit.
func (e *eventReader) next() ([]byte, error) {
	e.data, e.typ = e.data[:0], e.typ[:0]
	hasData := false
	for {
		line, err := e.readLine()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 { // the end of an event
			// An event with empty data (the priming event of SEP-1699,
			// which carries only an id) is not a message, as the SDK's
			// client reads it.
			if hasData && len(e.data) > 0 && (len(e.typ) == 0 || string(e.typ) == "message") {
				return e.data, nil
			}
			e.data, e.typ, hasData = e.data[:0], e.typ[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, value...)
			hasData = true
			if e.limit > 0 && int64(len(e.data)) > e.limit {
				return nil, errMessageTooLarge
			}
		case "event":
			e.typ = append(e.typ[:0], value...)
		}
		// "id", "retry" and comments (an empty field) are not used.
	}
}

// readLine reads one line without its end.
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
		if errors.Is(err, io.EOF) && len(e.line) > 0 {
			break // a last line without its end
		}
		return nil, err
	}
	line := bytes.TrimSuffix(e.line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
