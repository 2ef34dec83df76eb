package gateway_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The conformance suite of the direct path, in the style of the go-sdk's
// own (mcp/conformance_test.go): each testdata/conformance/*.txtar case is
// a scripted upstream and a sequence of client POSTs, replayed through a
// gateway with its direct path and through one without it
// (gateway.WithoutDirect: the go-sdk's server and client on the hop),
// against the same upstream script. Every answer must be the same on both
// paths, message for message, byte for byte (after the normalizations of
// normalizeAnswer), and equal to the case's "want" section. A go-sdk bump
// must pass it: it is what tells a change of the SDK's answers that the
// direct path does not follow. Run with -update to rewrite the "want"
// sections from the SDK-only gateway.
//
// A case's sections:
//
//   - options (optional): the case's own bounds, {"maxCallsPerSession": n};
//     "stateless": true replays the steps as MCP 2026-07-28 requests (no
//     session: no initialize, no GET stream; the Mcp-Protocol-Version
//     header 2026-07-28, and Mcp-Method and Mcp-Name taken from the body
//     unless the step sets them, "-" leaving one out). The JSON string
//     "$META" in a client's body is replaced by the _meta such a request
//     carries (the protocol version and empty client capabilities).
//     "upstreamStateless": true makes the upstream a stateless go-sdk
//     server (StreamableHTTPOptions.Stateless) that refuses initialize, so
//     that the gateway's client speaks MCP 2026-07-28 to it (no session,
//     the protocol's _meta on every request); "upstreamSessionless" the
//     same server answering initialize (2025-11-25 without a session id).
//     Then the upstream's tools/call requests and cancellations, as it
//     sees them (headers and body, the JSON-RPC id aside), must be the
//     same on both paths too; {"arrived": "notifications/cancelled"}
//     waits for a cancellation.
//   - upstream: one JSON object per line, {"tool": name, "sse": bool,
//     "block": bool, "messages": [...]}: how the upstream answers a
//     tools/call of that tool — the messages in order, as a JSON body (the
//     last one) or as an event stream, each "$ID" value replaced by the
//     call's JSON-RPC id; "block" holds the answer until the step "release"
//     names the tool, or the upstream's request ends (then nothing is
//     written); "headers" are set on the answer; "status", "contentType" and "body" answer with that
//     status and body as they are ("$ID" in it replaced). The JSON
//     string "$BIG", here and in a client's body, is replaced by one
//     longer than the suite's WithMaxMessageBytes.
//   - client: one JSON object per step: {"post": body} or {"raw": text}
//     (a body that is not JSON), with "headers" to set, "async": a name to
//     send it in the background, "direct": true when the gateway with the
//     direct path must answer it itself (a JSON body, not an event
//     stream); {"arrived": tool} waits until the upstream has a call of
//     the tool; {"release": tool} lets it answer; {"wait": name} takes the
//     answer of an async POST; {"notices": n} takes the next n messages of
//     the session's GET stream (the upstream's notifications reach the
//     client there).
//   - want: one JSON line per answer, {"status": ..., "messages": [...]}
//     (or {"stream": [...]} for "notices"), in the order of the steps
//     that answer.
var update = flag.Bool("update", false, "rewrite the want sections of testdata/conformance")

// conformanceManifest is every case's manifest.
const conformanceManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "doc.read", "entity": "doc", "action_type": "read", "operation_id": "read",
     "description": "Read one document.",
     "required_parameters": [{"name": "name", "type": "string", "description": "The name", "maxLength": 40}],
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.list", "entity": "doc", "action_type": "read", "operation_id": "list",
     "description": "List the documents.",
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.range", "entity": "doc", "action_type": "read", "operation_id": "range",
     "description": "Read a range of lines.",
     "required_parameters": [{"name": "from", "type": "integer", "description": "The first line"},
                             {"name": "to", "type": "integer", "description": "The last line"}],
     "constraints": {"forward": "args.to > args.from"},
     "output_schema": {"type": "object", "required": ["n"]},
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.ghost", "entity": "doc", "action_type": "read", "operation_id": "ghost",
     "description": "A tool the upstream does not offer.",
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.admin", "entity": "doc", "action_type": "read", "operation_id": "admin_read",
     "description": "Read an administrator's document.", "required_roles": ["admin"],
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.limited", "entity": "doc", "action_type": "read", "operation_id": "limited",
     "description": "Read, once an hour.", "rate_limit": "1/hour",
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "doc.pinned", "entity": "doc", "action_type": "read", "operation_id": "pinned",
     "description": "A tool whose pin the upstream does not match.",
     "upstream_sha256": "0000000000000000000000000000000000000000000000000000000000000000",
     "risk_level": "none", "idempotent": true, "scope": "global"}
  ]
}`

// conformanceTools are the tools the upstream offers.
var conformanceTools = []string{"read", "list", "range", "admin_read", "limited", "pinned", "unlisted"}

// Bounds of the gateways of the suite, small enough for a case to pass them.
const (
	conformanceMaxBytes    = 8 << 10
	conformanceCallTimeout = 3 * time.Second
)

type conformanceCase struct {
	comment  string
	options  conformanceOptions
	upstream map[string]upstreamScript
	steps    []conformanceStep
	want     []string
	files    []txtarFile
}

// conformanceOptions are a case's own bounds (0: the suite's).
type conformanceOptions struct {
	MaxCallsPerSession  int  `json:"maxCallsPerSession"`
	Stateless           bool `json:"stateless"`
	UpstreamStateless   bool `json:"upstreamStateless"`
	UpstreamSessionless bool `json:"upstreamSessionless"`
}

// statelessMeta is what "$META" stands for in a client's body.
const statelessMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// statelessHeaders sets the standard headers of a 2026-07-28 request from
// its body, as the go-sdk's client does.
func statelessHeaders(h http.Header, body []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	if m.Method != "" {
		h.Set("Mcp-Method", m.Method)
	}
	if m.Params.Name != "" {
		h.Set("Mcp-Name", m.Params.Name)
	}
}

type upstreamScript struct {
	Tool        string            `json:"tool"`
	SSE         bool              `json:"sse"`
	Block       bool              `json:"block"`
	Messages    []json.RawMessage `json:"messages"`
	Status      int               `json:"status"`
	ContentType string            `json:"contentType"`
	Body        *string           `json:"body"`
	Headers     map[string]string `json:"headers"`
}

type conformanceStep struct {
	Post    json.RawMessage   `json:"post"`
	Raw     *string           `json:"raw"`
	Headers map[string]string `json:"headers"`
	Async   string            `json:"async"`
	Direct  bool              `json:"direct"`
	Arrived string            `json:"arrived"`
	Release string            `json:"release"`
	Wait    string            `json:"wait"`
	Notices int               `json:"notices"`
}

func TestDirectConformance(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no conformance cases: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel() // each case has its own upstreams and gateways
			c := loadConformanceCase(t, path)
			viaSDK, sdkJSON, sdkUp := replay(t, c, gateway.WithoutDirect())
			direct, answeredDirect, directUp := replay(t, c)
			if c.options.UpstreamStateless || c.options.UpstreamSessionless {
				for i := range max(len(sdkUp), len(directUp)) {
					if d, s := at(directUp, i), at(sdkUp, i); d != s {
						t.Errorf("upstream request %d differs:\ndirect path %s\nSDK path    %s", i+1, d, s)
					}
				}
			}
			if slices.Contains(slices.Collect(maps.Values(sdkJSON)), true) {
				t.Fatal("the gateway without its direct path answered a call with a JSON body: the case does not compare the two paths")
			}
			for i := range max(len(viaSDK), len(direct)) {
				d, s := at(direct, i), at(viaSDK, i)
				if d != s {
					t.Errorf("answer %d differs:\ndirect path %s\nSDK path    %s", i+1, d, s)
				}
			}
			for i, step := range c.steps {
				if step.Direct && !answeredDirect[i] {
					t.Errorf("step %d: the direct path did not answer it: the case does not compare the two paths", i+1)
				}
			}
			if *update {
				writeWant(t, path, c, viaSDK)
				return
			}
			for i := range max(len(c.want), len(viaSDK)) {
				if w, g := at(c.want, i), at(viaSDK, i); w != g {
					t.Errorf("answer %d:\ngot  %s\nwant %s", i+1, g, w)
				}
			}
		})
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// replay runs c's steps against a new upstream and a new gateway with
// opts, and returns the answers, normalized, in the order of the steps
// that answer, which steps the gateway answered with a JSON body, and the
// tools/call requests the upstream saw (upstreamRequest).
func replay(t *testing.T, c *conformanceCase, opts ...gateway.Option) (answers []string, jsonBody map[int]bool, upCalls []string) {
	t.Helper()
	up := newScriptedUpstream(t, c.upstream, c.options.UpstreamStateless || c.options.UpstreamSessionless, c.options.UpstreamStateless)
	defer func() { upCalls = up.seenCalls() }()
	m, err := manifest.Parse([]byte(conformanceManifest))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	opts = append([]gateway.Option{
		gateway.WithPrincipal(mcpgate.StaticPrincipal(middleware.Principal{ID: "agent", Roles: []string{"user"}})),
		gateway.WithMaxMessageBytes(conformanceMaxBytes),
		gateway.WithCallTimeout(conformanceCallTimeout),
		gateway.WithMaxCallsPerSession(c.options.MaxCallsPerSession),
		gateway.WithTrustClientElicitation(),
	}, opts...)
	g, err := gateway.New(enf, gateway.Upstream{URL: up.URL}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(g.Handler())
	t.Cleanup(func() { front.Close(); g.Close() })
	url := front.URL + "/mcp"
	var (
		session, version string
		notices          <-chan string
	)
	if !c.options.Stateless {
		session, version = conformanceSession(t, url)
		notices = standaloneStream(t, url, session, version)
	}

	type answer struct {
		text     string
		jsonBody bool
	}
	async := map[string]chan answer{}
	jsonBody = map[int]bool{}
	do := func(step conformanceStep) answer {
		body := expandBig([]byte(step.Post))
		if step.Raw != nil {
			body = []byte(*step.Raw)
		}
		body = bytes.ReplaceAll(body, []byte(`"$META"`), []byte(statelessMeta))
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return answer{}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.options.Stateless {
			statelessHeaders(req.Header, body)
		} else {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		for k, v := range step.Headers {
			if v == "-" {
				req.Header.Del(k)
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		return answer{normalizeAnswer(resp.StatusCode, mt, resp.Body), mt == "application/json" && resp.StatusCode == http.StatusOK}
	}
	for i, step := range c.steps {
		switch {
		case step.Arrived != "":
			select {
			case <-up.arrived(step.Arrived):
			case <-time.After(10 * time.Second):
				t.Fatalf("step %d: the upstream got no call of %s", i+1, step.Arrived)
			}
		case step.Release != "":
			up.release(step.Release)
		case step.Notices > 0:
			var msgs []string
			for range step.Notices {
				select {
				case m := <-notices:
					msgs = append(msgs, m)
				case <-time.After(10 * time.Second):
					t.Fatalf("step %d: %d of %d messages on the session's stream: %v", i+1, len(msgs), step.Notices, msgs)
				}
			}
			answers = append(answers, `{"stream":[`+strings.Join(msgs, ",")+`]}`)
		case step.Wait != "":
			a := <-async[step.Wait]
			answers = append(answers, a.text)
			jsonBody[i] = a.jsonBody
		case step.Async != "":
			ch := make(chan answer, 1)
			async[step.Async] = ch
			go func() { ch <- do(step) }()
		default:
			a := do(step)
			answers = append(answers, a.text)
			jsonBody[i] = a.jsonBody
		}
	}
	// An async answer was waited for by its step; any other is taken here,
	// so that no POST outlives the case.
	for i, step := range c.steps {
		if step.Async != "" && !slicesHasWait(c.steps, step.Async) {
			a := <-async[step.Async]
			answers = append(answers, a.text)
			jsonBody[i] = a.jsonBody
		}
	}
	return answers, jsonBody, nil
}

// conformanceSession initializes a session of the gateway at url, as a
// client on protocol 2025-11-25, with raw POSTs.
func conformanceSession(t *testing.T, url string) (session, version string) {
	t.Helper()
	post := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"conformance","version":"1"}}}`)
	answer := normalizeAnswer(resp.StatusCode, "text/event-stream", resp.Body)
	resp.Body.Close()
	session = resp.Header.Get("Mcp-Session-Id")
	if session == "" || !strings.Contains(answer, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", answer)
	}
	version = "2025-11-25"
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Mcp-Session-Id", session)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return session, version
}

// standaloneStream opens the session's GET stream, on which the gateway
// sends the client what is not an answer to one of its POSTs (the
// upstream's notifications), and returns its messages.
func standaloneStream(t *testing.T, url, session, version string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("the session's stream: %v %v", resp, err)
	}
	out := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				select {
				case out <- volatile.ReplaceAllString(d, `"$1":"…"`):
				default: // more than a case takes: dropped
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return out
}

func slicesHasWait(steps []conformanceStep, name string) bool {
	for _, s := range steps {
		if s.Wait == name {
			return true
		}
	}
	return false
}

// volatile are the parts of an answer that differ from run to run: the
// trace and audit ids of an AXAG refusal, and times.
var volatile = regexp.MustCompile(`"(trace_id|span_id|request_id|audit_id|timestamp|retry_after|retry_after_seconds)":("[^"]*"|[0-9.]+)`)

// normalizeAnswer is an HTTP answer as the suite compares it: its status
// and its JSON-RPC messages (a JSON body's one, an event stream's message
// events; any other body as text), whatever the body's content type — the
// direct path answers with a JSON body where the SDK answers with an event
// stream.
func normalizeAnswer(status int, mediaType string, body io.Reader) string {
	raw, _ := io.ReadAll(body)
	var msgs []json.RawMessage
	switch mediaType {
	case "application/json":
		msgs = append(msgs, json.RawMessage(bytes.TrimSpace(raw)))
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				msgs = append(msgs, json.RawMessage(d))
			}
		}
	default:
		if t := strings.TrimSpace(string(raw)); t != "" {
			s, _ := json.Marshal(t)
			msgs = append(msgs, s)
		}
	}
	out, _ := json.Marshal(struct {
		Status   int               `json:"status"`
		Messages []json.RawMessage `json:"messages"`
	}{status, msgs})
	return volatile.ReplaceAllString(string(out), `"$1":"…"`)
}

// scriptedUpstream is a go-sdk server (initialize, tools/list, and the
// rest) whose tools/call are answered by the case's script.
type scriptedUpstream struct {
	*httptest.Server
	scripts map[string]upstreamScript
	mu      sync.Mutex
	arrive  map[string]chan struct{}
	free    map[string]chan struct{}
	calls   []string // the tools/call requests, as saw records them
}

func newScriptedUpstream(t *testing.T, scripts map[string]upstreamScript, stateless, noInitialize bool) *scriptedUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "scripted-upstream", Version: "v1"}, nil)
	for _, name := range conformanceTools {
		srv.AddTool(&mcp.Tool{Name: name, Description: "A scripted tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "unscripted"}}}, nil
			})
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	u := &scriptedUpstream{scripts: scripts, arrive: map[string]chan struct{}{}, free: map[string]chan struct{}{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if noInitialize && json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
				// Only MCP 2026-07-28: the gateway's client falls back to it.
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unsupported protocol version"}}`, m.ID)
				return
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "notifications/cancelled" {
				// The step {"arrived": "notifications/cancelled"} waits for it.
				u.saw(r.Header, body)
				arrive, _ := u.chans(m.Method)
				select {
				case arrive <- struct{}{}:
				default:
				}
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				u.saw(r.Header, body)
				if s, ok := scripts[m.Params.Name]; ok {
					u.answer(w, r, s, m.ID)
					return
				}
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// upstreamCallIDs is the JSON-RPC id of a request as the go-sdk's client and
// the direct path write it (the first members, in this order).
var upstreamCallIDs = regexp.MustCompile(`^\{"jsonrpc":"2.0","id":("[^"]*"|[0-9]+),`)

// upstreamCancelledIDs is the id a cancellation names.
var upstreamCancelledIDs = regexp.MustCompile(`"requestId":("[^"]*"|[0-9]+)`)

// saw records a tools/call or a cancellation the upstream got: its
// headers but those the id's length changes (Content-Length), and its
// body with the id (or the cancelled one) as "$ID".
func (u *scriptedUpstream) saw(h http.Header, body []byte) {
	h = h.Clone()
	h.Del("Content-Length")
	hdr, _ := json.Marshal(h)
	b := upstreamCallIDs.ReplaceAllLiteral(body, []byte(`{"jsonrpc":"2.0","id":"$ID",`))
	b = upstreamCancelledIDs.ReplaceAllLiteral(b, []byte(`"requestId":"$ID"`))
	u.mu.Lock()
	u.calls = append(u.calls, string(hdr)+" "+string(b))
	u.mu.Unlock()
}

// seenCalls are the tools/call requests the upstream got, in order.
func (u *scriptedUpstream) seenCalls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

func (u *scriptedUpstream) chans(tool string) (arrive, free chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.arrive[tool] == nil {
		u.arrive[tool], u.free[tool] = make(chan struct{}, 16), make(chan struct{})
	}
	return u.arrive[tool], u.free[tool]
}

func (u *scriptedUpstream) arrived(tool string) <-chan struct{} {
	a, _ := u.chans(tool)
	return a
}

func (u *scriptedUpstream) release(tool string) {
	_, f := u.chans(tool)
	close(f)
}

func (u *scriptedUpstream) answer(w http.ResponseWriter, r *http.Request, s upstreamScript, id json.RawMessage) {
	arrive, free := u.chans(s.Tool)
	arrive <- struct{}{}
	if s.Block {
		select {
		case <-free:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range s.Headers {
		w.Header().Set(k, v)
	}
	if s.Status != 0 || s.Body != nil {
		if s.ContentType != "" {
			w.Header().Set("Content-Type", s.ContentType)
		}
		w.WriteHeader(cmp.Or(s.Status, http.StatusOK))
		if s.Body != nil {
			io.WriteString(w, strings.ReplaceAll(*s.Body, "$ID", string(id)))
		}
		return
	}
	var msgs [][]byte
	for _, m := range s.Messages {
		msgs = append(msgs, expandBig(bytes.ReplaceAll(m, []byte(`"$ID"`), id)))
	}
	if !s.SSE {
		w.Header().Set("Content-Type", "application/json")
		if len(msgs) > 0 {
			w.Write(msgs[len(msgs)-1])
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, m := range msgs {
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
		w.(http.Flusher).Flush()
	}
}

// expandBig replaces the JSON string "$BIG" with one longer than the
// suite's WithMaxMessageBytes.
func expandBig(data []byte) []byte {
	return bytes.ReplaceAll(data, []byte(`"$BIG"`), []byte(`"`+strings.Repeat("x", conformanceMaxBytes+1)+`"`))
}

// A txtar archive, as golang.org/x/tools/txtar reads and writes it: a
// comment, then files, each introduced by a line "-- name --".
type txtarFile struct {
	name string
	data []byte
}

func parseTxtar(data []byte) (comment string, files []txtarFile) {
	var cur *txtarFile
	var head strings.Builder
	for line := range strings.Lines(string(data)) {
		trimmed := strings.TrimRight(line, "\r\n")
		if name, ok := strings.CutPrefix(trimmed, "-- "); ok && strings.HasSuffix(name, " --") {
			files = append(files, txtarFile{name: strings.TrimSpace(strings.TrimSuffix(name, " --"))})
			cur = &files[len(files)-1]
			continue
		}
		if cur == nil {
			head.WriteString(line)
		} else {
			cur.data = append(cur.data, line...)
		}
	}
	return head.String(), files
}

func formatTxtar(comment string, files []txtarFile) []byte {
	var b bytes.Buffer
	b.WriteString(comment)
	for _, f := range files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.Write(f.data)
	}
	return b.Bytes()
}

func loadConformanceCase(t *testing.T, path string) *conformanceCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &conformanceCase{upstream: map[string]upstreamScript{}}
	c.comment, c.files = parseTxtar(data)
	for _, f := range c.files {
		dec := json.NewDecoder(bytes.NewReader(f.data))
		switch f.name {
		case "upstream":
			for dec.More() {
				var s upstreamScript
				if err := dec.Decode(&s); err != nil {
					t.Fatalf("%s: upstream: %v", path, err)
				}
				c.upstream[s.Tool] = s
			}
		case "client":
			for dec.More() {
				var s conformanceStep
				if err := dec.Decode(&s); err != nil {
					t.Fatalf("%s: client: %v", path, err)
				}
				c.steps = append(c.steps, s)
			}
		case "options":
			if err := json.Unmarshal(f.data, &c.options); err != nil {
				t.Fatalf("%s: options: %v", path, err)
			}
		case "want":
			for line := range strings.Lines(string(f.data)) {
				if line = strings.TrimSpace(line); line != "" {
					c.want = append(c.want, line)
				}
			}
		default:
			t.Fatalf("%s: unknown section %q", path, f.name)
		}
	}
	if len(c.steps) == 0 {
		t.Fatalf("%s: no client steps", path)
	}
	return c
}

func writeWant(t *testing.T, path string, c *conformanceCase, answers []string) {
	t.Helper()
	want := txtarFile{name: "want", data: []byte(strings.Join(answers, "\n") + "\n")}
	files := make([]txtarFile, 0, len(c.files)+1)
	for _, f := range c.files {
		if f.name != "want" {
			files = append(files, f)
		}
	}
	if err := os.WriteFile(path, formatTxtar(c.comment, append(files, want)), 0o666); err != nil {
		t.Fatal(err)
	}
}
