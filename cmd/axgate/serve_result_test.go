package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// resultManifest has a read whose result nothing checks (doc.read) and
// reads whose result an output_schema (doc.stat) or a postcondition
// (doc.peek) checks.
const resultManifest = `{"version":"1.0.0","conformance":"basic","entities":[{"name":"doc","actions":[
 {"intent":"doc.read","action_type":"read","operation_id":"read","description":"Read a document.",
  "parameters":{"path":{"type":"string","description":"Its path","required":true,"maxLength":200}},
  "risk_level":"none","idempotent":true,"scope":"global"},
 {"intent":"doc.stat","action_type":"read","operation_id":"stat","description":"A document's size.",
  "parameters":{"path":{"type":"string","description":"Its path","required":true,"maxLength":200}},
  "risk_level":"none","idempotent":true,"scope":"global",
  "output_schema":{"type":"object","required":["size"],"properties":{"size":{"type":"number","maximum":1000}}}},
 {"intent":"doc.peek","action_type":"read","operation_id":"peek","description":"A document's first line.",
  "parameters":{"path":{"type":"string","description":"Its path","required":true,"maxLength":200}},
  "risk_level":"none","idempotent":true,"scope":"global","postconditions":["short line"]}]}]}`

// resultUpstream answers each tool with the body set for it.
type resultUpstream struct {
	mu     sync.Mutex
	answer map[string]string
}

func (u *resultUpstream) set(tool, body string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.answer[tool] = body
}

func (u *resultUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	body := u.answer[r.PathValue("name")]
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}

// newResultGateway serves resultManifest, anonymously, in front of up.
func newResultGateway(t *testing.T, up *resultUpstream) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /tools/{name}/call", up)
	upSrv := httptest.NewServer(mux)
	t.Cleanup(upSrv.Close)
	mpath := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(mpath, []byte(resultManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(upSrv.URL)
	gw, err := newGateway(context.Background(), serveConfig{
		manifest: mpath,
		enforcerConfig: enforcerConfig{anonymous: true, issuer: "axgate", audience: "axgate",
			postconditions: conditionFlags{`short line=size(result.line) < 10`}},
		upstreamTimeout: 5 * time.Second,
	}, u, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.close)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL
}

// callRaw posts a call and returns the status and the body as received.
func callRaw(t *testing.T, base, tool string) (int, string) {
	t.Helper()
	resp, err := http.Post(base+"/tools/"+tool+"/call", "application/json", strings.NewReader(`{"path":"docs/a.md"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeResultUncheckedPassesThrough: a result no gate reads reaches the
// client as the upstream wrote it (compacted): its keys in their order, its
// numbers with all their digits — not decoded into Go values and encoded
// again (keys sorted, 12345678901234567890 rounded to a double).
func TestServeResultUncheckedPassesThrough(t *testing.T) {
	t.Parallel()
	up := &resultUpstream{answer: map[string]string{}}
	base := newResultGateway(t, up)
	up.set("read", `{"result": {"z": 12345678901234567890, "a": [1.50, "x<y"]}}`)
	status, body := callRaw(t, base, "read")
	if want := `{"result":{"z":12345678901234567890,"a":[1.50,"x<y"]}}` + "\n"; status != 200 || body != want {
		t.Errorf("got %d %q, want 200 %q", status, body, want)
	}
}

// TestServeResultPassThroughFailsClosed: what the upstream sends beside
// one JSON result — trailing data, invalid JSON, no result — fails the call
// (502) without relaying a byte of it, and a result that is not UTF-8
// reaches the client as valid UTF-8 (U+FFFD), as when it was decoded.
func TestServeResultPassThroughFailsClosed(t *testing.T) {
	t.Parallel()
	up := &resultUpstream{answer: map[string]string{}}
	base := newResultGateway(t, up)
	for _, answer := range []string{
		`{"result": {"a": 1}} {"result": {"evil": 1}}`,
		`{"result": {"a": 1}}x`,
		`{"result": {"a": }}`,
		`{"result": {"a": 1}`,
		`{"result": "unterminated}`,
		`{"other": 1}`,
		`{"result": null, "result": {"a": 1`,
	} {
		up.set("read", answer)
		status, body := callRaw(t, base, "read")
		if status != http.StatusBadGateway || !strings.Contains(body, "AXGATE_TOOL_FAILED") || strings.Contains(body, "evil") {
			t.Errorf("upstream answer %q: got %d %s, want 502 AXGATE_TOOL_FAILED", answer, status, body)
		}
	}
	up.set("read", "{\"result\": {\"line\": \"ab\xffcd\"}}")
	status, body := callRaw(t, base, "read")
	if want := `{"result":{"line":"ab` + "\uFFFD" + `cd"}}` + "\n"; status != 200 || body != want || !utf8.ValidString(body) {
		t.Errorf("a result that is not UTF-8: got %d %q, want 200 %q", status, body, want)
	}
}

// TestServeResultCheckedIsDecoded: a result an output_schema or a
// postcondition checks is still checked, and the client receives it as the
// checks read it (decoded and encoded again: keys sorted).
func TestServeResultCheckedIsDecoded(t *testing.T) {
	t.Parallel()
	up := &resultUpstream{answer: map[string]string{}}
	base := newResultGateway(t, up)

	up.set("stat", `{"result": {"size": 5000}}`)
	if status, body := callRaw(t, base, "stat"); status != http.StatusBadGateway || !strings.Contains(body, "AXGATE_POSTCONDITION_FAILED") {
		t.Errorf("a result the output_schema refuses: got %d %s", status, body)
	}
	up.set("stat", `{"result": {"size": 142, "etag": "x"}}`)
	if status, body := callRaw(t, base, "stat"); status != 200 || body != `{"result":{"etag":"x","size":142}}`+"\n" {
		t.Errorf("a result the output_schema allows: got %d %q", status, body)
	}

	up.set("peek", `{"result": {"line": "a line far too long"}}`)
	if status, body := callRaw(t, base, "peek"); status != http.StatusBadGateway || !strings.Contains(body, "AXGATE_POSTCONDITION_FAILED") {
		t.Errorf("a result the postcondition refuses: got %d %s", status, body)
	}
	up.set("peek", `{"result": {"z": 1, "line": "short"}}`)
	if status, body := callRaw(t, base, "peek"); status != 200 || body != `{"result":{"line":"short","z":1}}`+"\n" {
		t.Errorf("a result the postcondition allows: got %d %q", status, body)
	}
}

// TestServeResultRefusesAnswerTooDeepForUnmarshal: a result nested as deep
// as json.Unmarshal allows for one value (10000 levels) is one level too
// deep inside the answer's object, which json.Unmarshal refuses: serve
// refuses it too (502), checked or not, rather than relay an answer no
// encoding/json client can read.
func TestServeResultRefusesAnswerTooDeepForUnmarshal(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	answer := `{"result":` + deep + `}`
	if _, ok := resultOf([]byte(answer)); ok {
		t.Errorf("resultOf accepted an answer nested 10001 deep, which json.Unmarshal refuses")
	}
	up := &resultUpstream{answer: map[string]string{}}
	base := newResultGateway(t, up)
	for _, tool := range []string{"read", "stat"} {
		up.set(tool, answer)
		if status, body := callRaw(t, base, tool); status != http.StatusBadGateway || !strings.Contains(body, "AXGATE_TOOL_FAILED") {
			t.Errorf("%s: an answer nested 10001 deep: got %d %.120s, want 502 AXGATE_TOOL_FAILED", tool, status, body)
		}
	}
}

// TestServeResultBeyondFloat64Refused: a result with a number beyond a
// float64's range (1e400), which json.Unmarshal refuses to decode, fails
// the call (502) as it did when every result was decoded, rather than
// reach the client unchecked; a number that only rounds (or underflows to
// 0) and such a number inside a string still pass through as written.
func TestServeResultBeyondFloat64Refused(t *testing.T) {
	t.Parallel()
	up := &resultUpstream{answer: map[string]string{}}
	base := newResultGateway(t, up)
	huge := "1" + strings.Repeat("0", 309)
	for _, answer := range []string{
		`{"result": {"n": 1e400}}`, `{"result": [-1E309]}`, `{"result": 1e+400}`, `{"result": {"a": "1e400", "n": ` + huge + `}}`,
	} {
		up.set("read", answer)
		if status, body := callRaw(t, base, "read"); status != http.StatusBadGateway || !strings.Contains(body, "AXGATE_TOOL_FAILED") {
			t.Errorf("upstream answer %.60q: got %d %.200s, want 502 AXGATE_TOOL_FAILED", answer, status, body)
		}
	}
	up.set("read", `{"result": {"s": "1e400", "tiny": 1e-400, "n": 12345678901234567890e10}}`)
	if status, body := callRaw(t, base, "read"); status != 200 || body != `{"result":{"s":"1e400","tiny":1e-400,"n":12345678901234567890e10}}`+"\n" {
		t.Errorf("numbers a float64 holds: got %d %s", status, body)
	}
}

// resultByUnmarshal is how serve read the upstream's answer before
// soleResult: json.Unmarshal into a struct with the one field.
func resultByUnmarshal(data []byte) (json.RawMessage, bool) {
	var ok struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &ok); err != nil || ok.Result == nil {
		return nil, false
	}
	return ok.Result, true
}

// FuzzResultOf: serve's reading of the upstream's answer accepts exactly
// what json.Unmarshal accepts, and reads the same result.
func FuzzResultOf(f *testing.F) {
	for _, s := range []string{
		`{"result":{"a":1}}`, ` { "result" : [1, 2] } `, `{"result": "}"}`, `{"result": 1}}`, `{"result": 1, "x": 2}`,
		`{"x": 2, "result": 1}`, `{"result": 1, "result": 2}`, `{"Result": 3}`, `{"result": null}`, `{"result": }`,
		"\v{\"result\": 1}", "{\"result\": 1}\u00a0", `{"result": 1} {"result": 2}`, `{"re\u0073ult": 4}`, `[]`, ``,
		"{\"result\": \"\xff\"}", `{"result": {"a": 1}`, `{"result" 1}`,
		`{"result":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotOK := resultOf(data)
		want, wantOK := resultByUnmarshal(data)
		if gotOK != wantOK || !bytes.Equal(got, want) {
			t.Errorf("resultOf(%q) = %q, %v; json.Unmarshal reads %q, %v", data, got, gotOK, want, wantOK)
		}
	})
}

// TestServeForwardsCallHeaders: the forwarded call carries its body's type,
// the caller's Idempotency-Key and who called, each header once with one
// value, and nothing of the caller's other headers.
func TestServeForwardsCallHeaders(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	got := make(chan http.Header, 1)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		_, _ = io.WriteString(w, `{"result":{"ok":true}}`)
	})
	_, base, _ := newShopGateway(t, serveConfig{enforcerConfig: enforcerConfig{jwks: pki.jwks}}, up)
	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":1}`,
		"Idempotency-Key", "k-1", "X-Secret", "s"); status != 200 {
		t.Fatalf("call: %d %v", status, body)
	}
	h := <-got
	for k, want := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
		"Idempotency-Key": "k-1", "X-Axgate-Principal": "alice", "X-Axgate-Tenant": "acme", "X-Secret": ""} {
		if v := h.Values(k); (want == "" && len(v) != 0) || (want != "" && (len(v) != 1 || v[0] != want)) {
			t.Errorf("%s: %q; want %q", k, v, want)
		}
	}
}

// FuzzNumbersDecode: on a valid JSON value, numbersDecode holds exactly
// when json.Unmarshal decodes it into an any (its numbers into float64s).
func FuzzNumbersDecode(f *testing.F) {
	for _, s := range []string{`1e400`, `[1, -2.5e-3, "1e400"]`, `{"a\"1e999": 1E308}`, `"\\"`, `-0`, `1e-400`, `{"n":` + strings.Repeat("9", 309) + `}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) || !utf8.Valid(v) {
			return
		}
		var x any
		if got, want := numbersDecode(v), json.Unmarshal(v, &x) == nil; got != want {
			t.Errorf("numbersDecode(%q) = %v; json.Unmarshal decodes it: %v", v, got, want)
		}
	})
}
