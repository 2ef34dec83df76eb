package httpgate

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// TestWriteResultRawMessageAsTheEncoderWrites: a json.RawMessage result is
// written as json.Encoder (HTML not escaped) writes it — compacted, its
// bytes otherwise as they are — and a RawMessage that is not JSON is a 500
// with the AXAG envelope, never its bytes.
func TestWriteResultRawMessageAsTheEncoderWrites(t *testing.T) {
	for _, raw := range []json.RawMessage{
		json.RawMessage(` { "z" : [1.50, 12345678901234567890, "x<y&z", "\u2028", "` + "\u2028" + `"] , "a":null} `),
		json.RawMessage(`"s"`), json.RawMessage(`null`), nil, json.RawMessage(`{}`),
	} {
		rec := httptest.NewRecorder()
		writeResult(rec, raw)
		b := jsonBuffers.Get().(*jsonBuffer)
		if err := b.enc.Encode(map[string]any{"result": raw}); err != nil {
			t.Fatal(err)
		}
		want := b.buf.String()
		releaseJSONBuffer(b)
		if rec.Code != 200 || rec.Body.String() != want {
			t.Errorf("writeResult(%q) = %d %q; want 200 %q", raw, rec.Code, rec.Body.String(), want)
		}
	}
	for _, raw := range []json.RawMessage{json.RawMessage(`{"a":`), json.RawMessage(`1 2`), json.RawMessage(``), json.RawMessage(`{"a":1}x`)} {
		rec := httptest.NewRecorder()
		writeResult(rec, raw)
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Error.Code != "AXGATE_INTERNAL" {
			t.Errorf("writeResult(%q) = %d %s; want 500 AXGATE_INTERNAL", raw, rec.Code, rec.Body.String())
		}
	}
}
