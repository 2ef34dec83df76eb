package direct

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParseDirect: what the direct path reads itself, and what it leaves
// to the SDK.
func TestParseDirect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		ok   bool
		name string
		args string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"a"}}}`, true, "read", `{"path":"a"}`},
		{` { "params" : { "arguments" : [1, {"x":"}"}] , "name" : "r\u0065ad" } , "method":"tools/call","id":"x-1","jsonrpc":"2.0" } `, true, "read", `[1, {"x":"}"}]`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":null}}`, true, "read", ``},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":{"traceparent":"00-x"}}}`, true, "read", ``},
		// The SDK's: a batch, a notification, another method, a float id.
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}]`, false, "", ""},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"read"}}`, false, "", ""},
		// A key written twice, in another case, or with an escape.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","name":"delete"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"},"params":{"name":"delete"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{},"arguments":{"a":1}}}`, false, "", ""},
		// Other params (the answer to an input request), a name that is not
		// a string, a method spelled with an escape, broken JSON.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","requestState":"s"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"read"}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}} {}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read",}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":[]}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"},"extra":1}`, false, "", ""},
		// Nested deeper than the SDK's decoder takes.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":{"a":` + strings.Repeat("[", 997) + strings.Repeat("]", 997) + `}}}`, true, "read", ""},
	} {
		d, ok := parseDirect([]byte(tc.body))
		if ok != tc.ok || d.name != tc.name || string(d.args) != tc.args {
			t.Errorf("%s: got %v %q %s, want %v %q %s", tc.body, ok, d.name, d.args, tc.ok, tc.name, tc.args)
		}
	}
}

// TestEventReader reads the message events of a stream as the go-sdk's
// client scans them: LF, CRLF and CR CR LF ends, data over several lines
// and trimmed of spaces, comments, other fields and event types, an event
// the stream ends in without a blank line or a line end.
func TestEventReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ stream, want string }{
		{": hello\n\n" +
			"event: message\r\ndata: {\"a\":1}\r\n\r\n" +
			"event: ping\ndata: skipped\n\n" +
			"event:  message \ndata:  {\"t\":1}  \n\r\r\n" +
			"id: 4\nretry: 100\ndata:{\"b\":\ndata: 2}\n\n" +
			"data:\n\n" +
			"data: last", `{"a":1}|{"t":1}|{"b":` + "\n" + `2}|last`},
		{"data: a\r\r", "a"},
		{"data: a\n", "a"},
		{"data: a\n\r\r\ndata: b\n\n", "a|b"},
	} {
		r := newEventReader(strings.NewReader(tc.stream))
		var got []string
		for {
			d, err := r.next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("%q: %v", tc.stream, err)
				}
				break
			}
			got = append(got, string(d))
		}
		// "data:" alone is an event with empty data: skipped, as the SDK's
		// client skips it (a priming event, TestDirectSkipsPrimingEvent).
		if g := strings.Join(got, "|"); g != tc.want {
			t.Errorf("%q: events %q, want %q", tc.stream, g, tc.want)
		}
	}
}

// TestEventReaderMalformedLine: a line without a colon is malformed, as the
// go-sdk's client reads it (it fails its connection), not a field.
func TestEventReaderMalformedLine(t *testing.T) {
	t.Parallel()
	r := newEventReader(strings.NewReader("data\n\ndata: {}\n\n"))
	if d, err := r.next(); !errors.Is(err, errMalformedEvent) {
		t.Fatalf("got %q, %v; want errMalformedEvent", d, err)
	}
}

// TestDecodeToolResult: the common result is decoded as the SDK decodes
// it, and any other by the SDK.
func TestDecodeToolResult(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"a\"b"}]}`,
		`{"content":[],"structuredContent":{"n":1,"m":[true,null]},"isError":false,"_meta":{"k":"v"}}`,
		`{"content":[{"type":"text","text":"boom"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"a"}],"resultType":"complete"}`,
		`{"content":[{"type":"text","text":"a","text":"b"}]}`,
		`{"content":[{"type":"text","text":"a"}],"structuredContent":null}`,
	} {
		got, err := decodeToolResult(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want := new(mcp.CallToolResult)
		if err := json.Unmarshal([]byte(raw), want); err != nil {
			t.Fatalf("%s: the SDK: %v", raw, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("%s:\ngot  %s\nSDK  %s", raw, g, w)
		}
	}
	if _, err := decodeToolResult(json.RawMessage(`{"content":"no"}`)); err == nil {
		t.Error("a result whose content is not a list was decoded")
	}
}

// TestEncodeToolResult: the direct path writes a result as the SDK does.
func TestEncodeToolResult(t *testing.T) {
	t.Parallel()
	for _, r := range []*mcp.CallToolResult{
		{Content: []mcp.Content{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a \"quoted\" <b>&é\u2028"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: ""}, &mcp.TextContent{Text: "two"}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"n": 1.5, "s": []any{"a", nil}}, Meta: mcp.Meta{"k": "v"}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x", Meta: mcp.Meta{"m": 1}}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("hi"), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: json.RawMessage(`{"a":1}`)},
	} {
		got, err := encodeToolResult(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\ngot  %s\nwant %s", got, want)
		}
	}
}

// TestEncodeCall: the direct path writes a tools/call as json.Marshal
// does.
func TestEncodeCall(t *testing.T) {
	t.Parallel()
	for _, p := range []*mcp.CallToolParams{
		{Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)},
		{Name: "r\"e<ad>", Arguments: json.RawMessage(`{ "path" : [1, 2] }`), Meta: mcp.Meta{"progressToken": "p", "traceparent": "00-x"}},
		{Name: "read", Arguments: json.RawMessage(nil)},
		{Name: "read", Arguments: map[string]any{"path": "a"}},
	} {
		got, err := encodeCall("axgate-7", p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			ID      string `json:"id"`
			Method  string `json:"method"`
			Params  any    `json:"params"`
		}{"2.0", "axgate-7", "tools/call", p})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\ngot  %s\nwant %s", got, want)
		}
	}
}

// TestParseCancelled: a notifications/cancelled names the direct call
// whose id it names exactly: an integer by its value as an integer literal,
// a string by its decoded text, never a string and an integer alike, and
// only with the key spelled as the SDK reads it.
func TestParseCancelled(t *testing.T) {
	t.Parallel()
	cancel := func(requestID string) string {
		return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + requestID + `}}`
	}
	for _, tc := range []struct {
		body   string
		callID string // the id of the call it cancels, "" for none
	}{
		{cancel(`9`), `9`},
		{cancel(`-0`), `0`},
		{cancel(`9007199254740993`), `9007199254740993`},
		{cancel(`"9"`), `"9"`},
		{cancel(`"\u0039"`), `"9"`},
		{cancel(`"axgate-1"`), `"axgate-1"`},
		{`{"params":{"reason":"x","requestId":7},"method":"notifications/cancelled","jsonrpc":"2.0"}`, `7`},
		// Not one call, or not a cancellation the SDK takes as this one.
		{cancel(`9.0`), ""},
		{cancel(`9.5`), ""},
		{cancel(`1e300`), ""},
		{cancel(`99999999999999999999`), ""},
		{cancel(`null`), ""},
		{cancel(`true`), ""},
		{cancel(`{}`), ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"RequestID":9}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10,"requestId":9}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":5}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":9}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","method":"notifications/cancelled","params":{"requestId":9}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"requestId":9}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled"}`, ""},
		{`[` + cancel(`9`) + `]`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}`, ""},
	} {
		id, ok := parseCancelled([]byte(tc.body))
		if ok != (tc.callID != "") {
			t.Errorf("%s: read %v, want %v", tc.body, ok, tc.callID != "")
			continue
		}
		if ok && id != requestKey([]byte(tc.callID)) {
			t.Errorf("%s: cancels %q, want the call with the id %s", tc.body, id, tc.callID)
		}
	}
	if requestKey([]byte(`9`)) == requestKey([]byte(`"9"`)) {
		t.Error("the integer id 9 and the string id \"9\" are one id")
	}
	if requestKey([]byte(`9007199254740992`)) == requestKey([]byte(`9007199254740993`)) {
		t.Error("2^53 and 2^53+1 are one id")
	}
}

// TestPostToolNameHeader: a tool name is the Mcp-Name header as the go-sdk
// client sets it (raw, non-ASCII bytes included); a name with CR or LF is
// not sent at all (net/http refuses the value), so it cannot add a header.
func TestPostToolNameHeader(t *testing.T) {
	t.Parallel()
	seen := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	p := New(Config{URL: srv.URL, HTTPClient: srv.Client(), MaxMessageBytes: 1 << 20, Bound: func(*http.Response) {}})
	h := postHeaders{version: statelessVersion, stateless: true, method: "tools/call"}
	h.name = "café"
	resp, err := p.post(t.Context(), h, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := (<-seen).Values("Mcp-Name"); len(got) != 1 || got[0] != "café" {
		t.Errorf("Mcp-Name %q, want [café]", got)
	}
	for _, name := range []string{"a\r\nX-Evil: 1", "a\nX-Evil: 1", "a\rb"} {
		h.name = name
		if resp, err := p.post(t.Context(), h, []byte(`{}`)); err == nil {
			resp.Body.Close()
			t.Errorf("%q: sent, with headers %v", name, <-seen)
		}
	}
}

// TestEncodeStatelessResult: the stateless front writes a result as the
// SDK's stateless server does (encodeToolResult of statelessResult), with
// the server's implementation in _meta encoded once.
func TestEncodeStatelessResult(t *testing.T) {
	t.Parallel()
	p := New(Config{ServerInfo: &mcp.Implementation{Name: "axgate <gw>", Version: "v1", Title: "é"}})
	if p.serverInfoMeta == nil {
		t.Fatal("the server's implementation was not encoded")
	}
	for _, r := range []*mcp.CallToolResult{
		nil,
		{},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a \"quoted\" <b>&é\u2028"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: ""}, &mcp.TextContent{Text: "two"}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"n": 1.5}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, Meta: mcp.Meta{"k": "v"}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, Meta: mcp.Meta{mcp.MetaKeyServerInfo: "theirs"}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("hi"), MIMEType: "image/png"}}},
	} {
		got, err := p.encodeStatelessResult(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encodeToolResult(p.statelessResult(r))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\ngot  %s\nwant %s", got, want)
		}
	}
}

// TestStatelessMetaRemembered: the _meta of a stateless call accepted last
// is accepted again without its checks, but only with the same version,
// and a _meta the checks refuse is refused before and after it.
func TestStatelessMetaRemembered(t *testing.T) {
	t.Parallel()
	call := func(meta string) directRequest {
		d, ok := parseDirect([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":` + meta + `}}`))
		if !ok {
			t.Fatalf("%s: not parsed", meta)
		}
		return d
	}
	const v = "2026-07-28"
	good := call(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)
	dup := call(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientCapabilities":{}}`)
	badCaps := call(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":1}}`)
	p := New(Config{})
	for i, c := range []struct {
		d       directRequest
		version string
		want    bool
	}{
		{dup, v, false}, {good, v, true}, {good, v, true}, {good, "2026-08-01", false},
		{dup, v, false}, {badCaps, v, false}, {good, v, true},
	} {
		if got := p.statelessMetaOK(c.d, c.version); got != c.want {
			t.Errorf("step %d: %s (version %s): got %v, want %v", i, c.d.rawMeta, c.version, got, c.want)
		}
	}
}

// TestLocalLoopback: a TCP address is loopback for the direct path exactly
// when its text is for the SDK's check (isLoopback).
func TestLocalLoopback(t *testing.T) {
	t.Parallel()
	for _, a := range []*net.TCPAddr{
		{IP: net.IPv4(127, 0, 0, 1), Port: 80}, {IP: net.IPv4(127, 9, 8, 7).To4(), Port: 1}, {IP: net.IPv6loopback, Port: 443},
		{IP: net.IPv6loopback, Port: 443, Zone: "lo"}, {IP: net.IPv4(10, 0, 0, 1), Port: 80}, {IP: net.ParseIP("::ffff:127.0.0.1")},
		{IP: net.ParseIP("fe80::1"), Zone: "eth0"}, {IP: net.IPv6zero}, {IP: net.IPv4zero}, {}, {IP: net.IP{1, 2, 3}},
	} {
		if got, want := localLoopback(a), isLoopback(a.String()); got != want {
			t.Errorf("%v: got %v, want %v", a, got, want)
		}
	}
}

// TestDecodeMetaRemembered: a _meta decoded again (the last one, kept) is
// what json.Unmarshal decodes, the call's own: what one call changes in
// it another does not see.
func TestDecodeMetaRemembered(t *testing.T) {
	t.Parallel()
	p := New(Config{})
	raws := []string{
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"x":[1,{"y":null},[]]},"io.modelcontextprotocol/clientInfo":{"name":"agent","version":"v1"}}`,
		`{}`, `{"a":1,"a":2.5e3,"b":[],"c":{},"d":null,"e":false,"f":"\u00e9"}`,
	}
	for _, raw := range raws {
		var want mcp.Meta
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			got, ok := p.decodeMeta([]byte(raw))
			if !ok || !reflect.DeepEqual(got, want) || got == nil {
				t.Fatalf("%s, decode %d: got %#v, want %#v", raw, i, got, want)
			}
			// The call changes its own.
			got["added"] = true
			for _, v := range got {
				switch v := v.(type) {
				case map[string]any:
					v["added"] = true
				case []any:
					if len(v) > 0 {
						v[0] = "changed"
					}
				}
			}
		}
	}
	if _, ok := p.decodeMeta([]byte(`{"a":`)); ok {
		t.Error("a _meta that is not JSON was decoded")
	}
}
