package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestArgumentsReachUpstreamAsChecked: arguments that could be read two ways
// are refused or reach the upstream exactly as checked.
//
// The fault: arguments the gate could read one way and the upstream another
// (duplicate keys, case-folded keys, arguments hidden in _meta) are refused,
// or reach the upstream exactly as checked.
func TestArgumentsReachUpstreamAsChecked(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	long := strings.Repeat("x", 41) // over read_note's maxLength of 40
	for _, tc := range []struct {
		name string
		args json.RawMessage
		meta mcp.Meta
	}{
		{"duplicate key, long last", json.RawMessage(`{"name":"hello","name":"` + long + `"}`), nil},
		{"duplicate key, long first", json.RawMessage(`{"name":"` + long + `","name":"hello"}`), nil},
		{"case-folded key", json.RawMessage(`{"name":"hello","NAME":"` + long + `"}`), nil},
		{"escaped duplicate key", json.RawMessage(`{"name":"hello","n\u0061me":"` + long + `"}`), nil},
		{"arguments in _meta", json.RawMessage(`{"name":"hello"}`), mcp.Meta{"arguments": map[string]any{"name": long}, "name": long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.seenTool("read_note"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: tc.args, Meta: tc.meta})
			seen := up.seenTool("read_note")
			if err != nil || res.IsError {
				if len(seen) != before {
					t.Fatal("a refused call reached the upstream")
				}
				return
			}
			if len(seen) != before+1 {
				t.Fatalf("the upstream saw %d calls, want 1", len(seen)-before)
			}
			last := seen[len(seen)-1]
			if last.Args != `{"name":"hello"}` {
				t.Errorf("the upstream got arguments %s, not the checked ones", last.Args)
			}
			for k := range last.Meta {
				if k != "progressToken" && k != "traceparent" && k != "tracestate" {
					t.Errorf("the upstream got the client's _meta key %q", k)
				}
			}
		})
	}
}

// TestCredentialsNeverForwarded: the client's credentials never reach the
// upstream.
//
// The fault: the client's bearer token, its credentials in _meta and
// anything that looks like one never reach the upstream.
func TestCredentialsNeverForwarded(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "a", "text": "b"},
		Meta: mcp.Meta{"axag/idempotency_key": "k-1", "authorization": "Bearer alice-token", "x-api-key": "s3cret"}})
	if err != nil || res.IsError {
		t.Fatalf("write: %v %v", err, res)
	}
	seen := up.seenTool("write_note")
	if len(seen) != 1 {
		t.Fatalf("the upstream saw %d writes", len(seen))
	}
	if seen[0].Authorization != "" {
		t.Errorf("the upstream got the Authorization header %q", seen[0].Authorization)
	}
	raw, _ := json.Marshal(seen[0].Meta)
	for _, secret := range []string{"alice-token", "s3cret", "k-1"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the upstream's _meta %s carries %q", raw, secret)
		}
	}
}

// TestUndeclaredToolHidden: a tool the manifest does not declare, or the
// caller's roles do not allow, is neither listed nor callable.
//
// The fault: a tool the upstream offers and the manifest does not name is
// neither listed nor callable, under its own name, one that folds to it, or
// the intent's name; nor is a tool the caller's roles do not allow.
func TestUndeclaredToolHidden(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	names := listNames(t, cs)
	if slices.Contains(names, "secret_dump") {
		t.Error("tools/list shows secret_dump")
	}
	if slices.Contains(names, "delete_note") {
		t.Error("tools/list shows alice delete_note, which needs the admin role")
	}
	for _, name := range []string{"secret_dump", "SECRET_DUMP", "note.read", "Read_Note", "delete_note"} {
		if res := callWithin(t, cs, name, map[string]any{"name": "hello"}); !res.IsError {
			t.Errorf("%s was called: %s", name, text(res))
		}
	}
	for _, c := range up.seen() {
		t.Errorf("the upstream saw a call of %s", c.Tool)
	}
}

// TestUnauthenticatedClientRefused: a client without a valid token gets no
// session.
//
// The fault: a client without a valid token gets no session and reaches
// nothing.
func TestUnauthenticatedClientRefused(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	if _, err := tryConnect(t, serve(t, g), "mallory-token", nil); err == nil {
		t.Fatal("a client with an unknown token got a session")
	}
	if len(up.seen()) != 0 {
		t.Fatal("the upstream saw a call")
	}
}

// TestUnaskedConfirmationRefused: an answer to a confirmation never asked
// does not reach the upstream.
//
// The fault: a client that answers the confirmation question it was never
// asked (an "accept" with no, or a forged, request state) does not reach the
// upstream.
func TestUnaskedConfirmationRefused(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: decline})
	for _, state := range []string{"", "forged", "eyJhbGciOiJub25lIn0.e30."} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "a", "text": "forged"},
			InputResponses: mcp.InputResponseMap{mcpgate.ConfirmationInputID: &mcp.ElicitResult{Action: "accept"}}, RequestState: state})
		cancel()
		if err == nil && !res.IsError {
			t.Errorf("state %q: the write passed: %s", state, text(res))
		}
	}
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the upstream saw %d writes", n)
	}
}
