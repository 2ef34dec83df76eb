package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// directCalls is a gateway in front of a notes upstream whose read_note
// of "stall" stalls until cancelled, with one session of alice.
type directCalls struct {
	up      *notes
	url     string
	session string
	version string
}

func newDirectCalls(t *testing.T) *directCalls {
	t.Helper()
	up, sdk := notesHandler()
	hs := httptest.NewServer(sdk)
	t.Cleanup(hs.Close)
	t.Cleanup(up.unstall) // a failing test does not hang on the stalled call
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "")
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	// Again, to run before the gateway's server is closed (which waits for
	// the stalled direct call).
	t.Cleanup(up.unstall)
	return &directCalls{up: up, url: url, session: cs.ID(), version: cs.InitializeResult().ProtocolVersion}
}

func (a *directCalls) post(t *testing.T, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Mcp-Session-Id", a.session)
	req.Header.Set("Mcp-Protocol-Version", a.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// stall starts a direct call with the JSON-RPC id callID that stalls at
// the upstream, and waits until it is there.
func (a *directCalls) stall(t *testing.T, callID string) {
	t.Helper()
	go a.post(t, `{"jsonrpc":"2.0","id":`+callID+`,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"stall"}}}`)
	select {
	case <-a.up.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalling call did not reach the upstream")
	}
}

// cancelled reports whether the stalled call was cancelled at the upstream
// within a while.
func (a *directCalls) cancelled(within time.Duration) bool {
	select {
	case <-a.up.cancelled:
		return true
	case <-time.After(within):
		return false
	}
}

// TestCancelParamsMatchedCaseSensitively: a notifications/cancelled names
// its call by "requestId" only, matched case-sensitively as the go-sdk does.
//
// The fault: parseCancelled decoded the params of a notifications/cancelled
// with encoding/json, which matches struct fields case-insensitively; the
// go-sdk decodes them with its internal json (segmentio,
// DontMatchCaseInsensitiveStructFields). A notification whose params say
// "RequestID" (or "requestid", "REQUESTID") names no request for the SDK,
// which cancels nothing, but the gateway cancelled the direct call with that
// id. Likewise {"requestId":10,"RequestID":9}: the SDK reads 10, the gateway
// (last match wins) read 9.
func TestCancelParamsMatchedCaseSensitively(t *testing.T) {
	t.Parallel()
	for _, params := range []string{
		`{"RequestID":9}`,
		`{"requestid":9}`,
		`{"requestId":10,"REQUESTID":9}`,
	} {
		t.Run(params, func(t *testing.T) {
			a := newDirectCalls(t)
			a.stall(t, `9`)
			code, _ := a.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":`+params+`}`)
			if code != http.StatusAccepted {
				t.Logf("the notification: HTTP %d", code)
			}
			if a.cancelled(1500 * time.Millisecond) {
				t.Errorf("params %s cancelled the direct call 9; the SDK reads no requestId 9 in them (case-sensitive) and cancels nothing", params)
			}
		})
	}
}

// TestCancelOnlyTheNamedIntegerID: a cancellation cancels only the direct
// call whose integer id it names exactly, however large or fractional the
// ids.
//
// The fault: a cancellation cancelled a direct call it does not name.
// requestID keyed an integer id by float64 then int64 (as the SDK keys its
// own calls, jsonrpc.MakeID), and parseCancelled read the requestId the same
// lossy way: 9.5 cancelled 9, 2^53 cancelled 2^53+1, and
// -2^63 (or 1e300, which int64() turns into -2^63 on amd64) cancelled
// 2^63-1.
func TestCancelOnlyTheNamedIntegerID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ call, cancel string }{
		{`9`, `9.5`},
		{`9007199254740993`, `9007199254740992`},
		{`9223372036854775807`, `-9223372036854775808`},
		{`9223372036854775807`, `1e300`},
	} {
		t.Run(tc.call+"/"+tc.cancel, func(t *testing.T) {
			a := newDirectCalls(t)
			a.stall(t, tc.call)
			a.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+tc.cancel+`}}`)
			if a.cancelled(1500 * time.Millisecond) {
				t.Errorf("a notifications/cancelled of requestId %s cancelled the direct call with the id %s", tc.cancel, tc.call)
			}
		})
	}
}

// TestDistinctIntegerIDsNotDuplicates: two direct calls with distinct
// integer ids are two calls, and a refused duplicate is answered under its
// own id.
//
// The fault: two calls with distinct integer ids that requestID mapped to
// one key: the second was refused as a "duplicate in-flight request ID"
// although nothing with its id is in flight, and the refusal was sent with
// the id of the OTHER call (the lossy key, not the request's own id), so a
// client routed that error to the call still in flight.
func TestDistinctIntegerIDsNotDuplicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, second string }{
		{`9007199254740992`, `9007199254740993`},
		{`-9223372036854775808`, `9223372036854775807`},
	} {
		t.Run(tc.first+"/"+tc.second, func(t *testing.T) {
			a := newDirectCalls(t)
			a.stall(t, tc.first)
			code, raw := a.post(t, `{"jsonrpc":"2.0","id":`+tc.second+`,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`)
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(raw, &m)
			if code != http.StatusOK {
				t.Errorf("the call %s, while %s is in flight: HTTP %d %s", tc.second, tc.first, code, raw)
			}
			if string(m.ID) != tc.second {
				t.Errorf("the call %s was answered with the id %s (the call in flight is %s)", tc.second, m.ID, tc.first)
			}
		})
	}
}

// TestCancelDistinguishesLoneSurrogateIDs: string ids that differ only in
// lone surrogates or invalid UTF-8 are distinct ids for a cancellation.
//
// The fault: requestKey keys a string id by its decoded text, and
// encoding/json decodes every lone surrogate escape (and every byte that is
// not UTF-8) to U+FFFD: the ids "\ud800", "\udc00" and "\ufffd" are three
// ids as the client wrote them (a JavaScript client keeps lone surrogates
// apart), and one key here. A notifications/cancelled of "\udc00" cancelled
// the direct call "\ud800", which it does not name. (The SDK does the same
// with its own calls, and answers its duplicate refusal with the id
// "\ufffd", which no request had: the direct path is as exact as the SDK
// here, not exact.)
func TestCancelDistinguishesLoneSurrogateIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ call, cancel string }{
		{`"\ud800"`, `"\udc00"`},
		{`"\ud800"`, `"\ufffd"`},
	} {
		t.Run(tc.call+"/"+tc.cancel, func(t *testing.T) {
			a := newDirectCalls(t)
			a.stall(t, tc.call)
			a.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+tc.cancel+`}}`)
			if a.cancelled(1500 * time.Millisecond) {
				t.Errorf("a notifications/cancelled of requestId %s cancelled the direct call with the id %s", tc.cancel, tc.call)
			}
		})
	}
}

// TestLoneSurrogateIDsNotDuplicates: string ids that differ only in lone
// surrogates are distinct ids, not duplicates in flight.
//
// The fault: likewise, a direct call "\udc00" while "\ud800" is in flight
// was refused as a duplicate in-flight id.
func TestLoneSurrogateIDsNotDuplicates(t *testing.T) {
	t.Parallel()
	a := newDirectCalls(t)
	a.stall(t, `"\ud800"`)
	code, raw := a.post(t, `{"jsonrpc":"2.0","id":"\udc00","method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`)
	if code != http.StatusOK {
		t.Errorf("the call \"\\udc00\", while \"\\ud800\" is in flight: HTTP %d %s", code, raw)
	}
}
