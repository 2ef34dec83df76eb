package httpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	axerr "github.com/axgate/axgate/errors"
)

// WriteError writes err as the AXAG error envelope, with its status and headers.
//
// The status is the error table's, with Content-Type application/json,
// Retry-After (whole seconds, rounded up) when the error carries a retry
// delay, WWW-Authenticate: Bearer on a 401 of bearer authentication (a
// missing or refused token, or no authentication configured) unless the
// response already has a challenge, and on 405 an Allow header naming the details' allowed_methods
// (RFC 9110 section 15.5.6 requires one) unless the response already has one.
// An error that is not an *axerr.Error is written as 500 AXGATE_INTERNAL
// with a generic message; its text is never shown to the caller.
func WriteError(w http.ResponseWriter, err error) {
	e, ok := axerr.As(err)
	if !ok {
		e = internalError(err)
	}
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds()))
	}
	status := e.HTTPStatus()
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		if ch := bearerChallenge(e); ch != "" {
			h.Set("WWW-Authenticate", ch)
		}
	}
	if status == http.StatusMethodNotAllowed && h.Get("Allow") == "" {
		if m, ok := e.Details[detailAllowedMethods].([]string); ok {
			h.Set("Allow", strings.Join(m, ", "))
		}
	}
	writeJSON(w, status, e.Envelope())
}

func internalError(err error) *axerr.Error {
	return axerr.New(axerr.CodeInternal, "the server failed to handle the call").WithCause(err)
}

// writeError is WriteError that also logs causes the caller does not see.
func (c *config) writeError(ctx context.Context, w http.ResponseWriter, err error) {
	if e, ok := axerr.As(err); !ok || e.Code == axerr.CodeInternal || e.Code == axerr.CodeToolFailed {
		c.log.LogAttrs(ctx, slog.LevelError, "httpgate: call failed", slog.Any("error", err))
	}
	WriteError(w, err)
}

// jsonBuffer is an encoder and the buffer it writes into, reused across
// responses: a response is encoded into memory first, so that an encoding
// failure still gets a proper 500 instead of half a body, and the buffer's
// growth is paid once per pooled buffer, not once per response.
type jsonBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonBuffers = sync.Pool{New: func() any {
	b := new(jsonBuffer)
	b.enc = json.NewEncoder(&b.buf)
	b.enc.SetEscapeHTML(false)
	return b
}}

// maxPooledBuffer is the largest buffer kept for reuse; a rare huge response
// does not pin its memory in the pool.
const maxPooledBuffer = 64 << 10

func releaseJSONBuffer(b *jsonBuffer) {
	if b.buf.Cap() <= maxPooledBuffer {
		b.buf.Reset()
		jsonBuffers.Put(b)
	}
}

// writeJSON writes v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b := jsonBuffers.Get().(*jsonBuffer)
	defer releaseJSONBuffer(b)
	if err := b.enc.Encode(v); err != nil {
		status = encodingFailed(b, err)
	}
	writeBuffered(w, status, b.buf.Bytes())
}

// writeResult writes a tool's result as 200 {"result": v}. It spares the
// wrapper object the encoder would otherwise box and reflect over.
func writeResult(w http.ResponseWriter, v any) {
	b := jsonBuffers.Get().(*jsonBuffer)
	defer releaseJSONBuffer(b)
	status := http.StatusOK
	b.buf.WriteString(`{"result":`)
	if err := encodeResult(b, v); err != nil {
		status = encodingFailed(b, err)
	} else {
		b.buf.WriteString("}\n")
	}
	writeBuffered(w, status, b.buf.Bytes())
}

// encodeResult appends v's encoding to b, without a newline. A
// json.RawMessage (a result passed on as the tool's JSON, an idempotent
// replay) is compacted straight into the buffer: the bytes the encoder
// writes for it (json.Compact is its own check and rendering of a
// RawMessage), without its reflection and its copy. Invalid JSON is an
// error, as from the encoder.
func encodeResult(b *jsonBuffer, v any) error {
	if raw, ok := v.(json.RawMessage); ok && raw != nil {
		return json.Compact(&b.buf, raw)
	}
	if err := b.enc.Encode(v); err != nil {
		return err
	}
	b.buf.Truncate(b.buf.Len() - 1) // the encoder's newline
	return nil
}

// encodingFailed replaces what b holds with the envelope of a 500.
func encodingFailed(b *jsonBuffer, err error) int {
	b.buf.Reset()
	_ = b.enc.Encode(internalError(err).Envelope())
	return http.StatusInternalServerError
}

// chunkingThreshold is the size of net/http's response buffer
// (bufferBeforeChunkingSize): a body that fits is counted by the server
// itself when the handler returns, which costs less than writing a
// Content-Length header the handler set; a larger one would be sent chunked
// unless its length is set here.
const chunkingThreshold = 2048

// writeBuffered writes an encoded JSON body with its headers. The header
// keys are canonical already and the values share one allocation.
func writeBuffered(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	if len(body) > chunkingThreshold {
		vals := []string{"application/json", "nosniff", strconv.Itoa(len(body))}
		h["Content-Length"] = vals[2:3:3]
		h["Content-Type"], h["X-Content-Type-Options"] = vals[0:1:1], vals[1:2:2]
	} else {
		vals := []string{"application/json", "nosniff"}
		h["Content-Type"], h["X-Content-Type-Options"] = vals[0:1:1], vals[1:2:2]
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeMessage writes the discovery API's {"error": "..."} body.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}
