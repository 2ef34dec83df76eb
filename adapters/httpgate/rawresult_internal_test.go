package httpgate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/propagation"
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

// TestHeaderCarrierAsHeaderCarrier: headerCarrier reads and lists what
// propagation.HeaderCarrier reads and lists, for the W3C keys and others,
// whatever their case in the request.
func TestHeaderCarrierAsHeaderCarrier(t *testing.T) {
	h := http.Header{}
	h.Add("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.Add("TraceState", "a=1")
	h.Add("baggage", "k=v")
	h.Add("Baggage", "k2=v2")
	h.Add("X-Other", "o")
	ours, theirs := headerCarrier(h), propagation.HeaderCarrier(h)
	for _, k := range []string{"traceparent", "tracestate", "baggage", "x-other", "Traceparent", "missing"} {
		if ours.Get(k) != theirs.Get(k) || !slices.Equal(ours.Values(k), theirs.Values(k)) {
			t.Errorf("%s: %q %q; HeaderCarrier %q %q", k, ours.Get(k), ours.Values(k), theirs.Get(k), theirs.Values(k))
		}
	}
	if got, want := slices.Sorted(slices.Values(ours.Keys())), slices.Sorted(slices.Values(theirs.Keys())); !slices.Equal(got, want) {
		t.Errorf("keys %v; want %v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ours.Get("traceparent"); _ = ours.Values("baggage") }); n != 0 {
		t.Errorf("%v allocations per lookup; want 0", n)
	}
}
