package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestGatewayHTTP drives the gateway in front of a streamable HTTP upstream
// with the Go SDK's client, as two callers.
func TestGatewayHTTP(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL + "/"}, pinOf(t, upURL, "write_note"), gateway.AllowUpstreamElicitation())
	url := serve(t, g)
	alice := connect(t, url, "alice-token", nil)
	ctx := context.Background()

	t.Run("list per caller", func(t *testing.T) {
		// Manifest order; not secret_dump (the manifest does not name it),
		// not archive_note (the upstream does not offer it), not
		// delete_note for alice (admin only).
		if got, want := listNames(t, alice), []string{"read_note", "write_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
			t.Errorf("alice lists %v, want %v", got, want)
		}
		bob := connect(t, url, "bob-token", nil)
		if got, want := listNames(t, bob), []string{"read_note", "write_note", "delete_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
			t.Errorf("bob lists %v, want %v", got, want)
		}
		// The manifest's definitions, not the upstream's.
		res, _ := alice.ListTools(ctx, nil)
		if d := res.Tools[0].Description; d != "Read one note by its name." {
			t.Errorf("read_note's description is %q, want the manifest's", d)
		}
		raw, _ := json.Marshal(res.Tools[0].InputSchema)
		if !strings.Contains(string(raw), `"maxLength":40`) {
			t.Errorf("read_note's input schema %s is not the enforced one", raw)
		}
	})

	t.Run("read", func(t *testing.T) {
		res := call(t, alice, "read_note", json.RawMessage(`{ "name" :"hello" }`))
		if res.IsError {
			t.Fatalf("read refused: %s", text(res))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if string(raw) != `{"name":"hello","text":"world"}` {
			t.Errorf("structured content %s", raw)
		}
		last := up.seenTool("read_note")
		if len(last) != 1 {
			t.Fatalf("the upstream saw %d reads, want 1", len(last))
		}
		c := last[0]
		if c.Args != `{"name":"hello"}` {
			t.Errorf("the upstream got the arguments %s, want their canonical form", c.Args)
		}
		if c.Authorization != "" {
			t.Errorf("the client's credentials reached the upstream: %q", c.Authorization)
		}
		for k := range c.Meta {
			if strings.HasPrefix(k, "axag/") {
				t.Errorf("the upstream got the credential %s", k)
			}
		}
	})

	t.Run("output schema of the upstream result", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "read_note", map[string]any{"name": "broken"}), "AXGATE_POSTCONDITION_FAILED", "output_schema")
	})

	t.Run("refused write", func(t *testing.T) {
		before := len(up.seenTool("write_note"))
		// Too long for the manifest.
		wantRefusal(t, call(t, alice, "write_note", map[string]any{"name": "n", "text": strings.Repeat("x", 201)}), "AXAG_OUT_OF_RANGE", "")
		// Alice's client cannot be asked: a confirmation token is needed.
		wantRefusal(t, call(t, alice, "write_note", map[string]any{"name": "n", "text": "t"}), "AXAG_CONFIRMATION_MISSING", "")
		if n := len(up.seenTool("write_note")); n != before {
			t.Errorf("refused writes reached the upstream (%d)", n-before)
		}
	})

	t.Run("write confirmed by elicitation", func(t *testing.T) {
		var asked []string
		var mu sync.Mutex
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return accept(ctx, req)
		}})
		before := len(up.seenTool("write_note"))
		// Keys out of order and an escape: the upstream gets the canonical
		// form (RFC 8785) of what the gates checked.
		res := call(t, cs, "write_note", json.RawMessage(`{"text":"buy milk","name":"\u0074odo"}`))
		if res.IsError || text(res) != "written" {
			t.Fatalf("confirmed write: %s", text(res))
		}
		if len(asked) != 1 {
			t.Errorf("the person was asked %d times", len(asked))
		}
		if got := up.seenTool("write_note"); len(got) != before+1 || got[len(got)-1].Args != `{"name":"todo","text":"buy milk"}` {
			t.Errorf("the upstream saw %+v", got)
		}
	})

	t.Run("write declined", func(t *testing.T) {
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: decline})
		before := len(up.seenTool("write_note"))
		wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "todo", "text": "sell milk"}), "AXAG_CONFIRMATION_MISSING", "declined")
		if n := len(up.seenTool("write_note")); n != before {
			t.Error("a declined write reached the upstream")
		}
	})

	t.Run("hidden upstream tool", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "secret_dump", map[string]any{}), "AXAG_INTENT_NOT_FOUND", "")
		if n := len(up.seenTool("secret_dump")); n != 0 {
			t.Error("a tool the manifest does not name was called upstream")
		}
	})

	t.Run("manifest tool the upstream lacks", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "archive_note", map[string]any{"name": "x"}), "AXAG_INTENT_NOT_FOUND", "")
	})

	t.Run("role", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "delete_note", map[string]any{"name": "hello"}), "AXAG_ROLE_INSUFFICIENT", "role_missing")
		if n := len(up.seenTool("delete_note")); n != 0 {
			t.Error("a refused delete reached the upstream")
		}
	})

	t.Run("upstream isError", func(t *testing.T) {
		r := wantRefusal(t, call(t, alice, "fail_note", map[string]any{}), "AXGATE_TOOL_FAILED", "")
		if !strings.Contains(r.Message, "disk full on /var/notes") {
			t.Errorf("the upstream's text is lost: %q", r.Message)
		}
	})

	t.Run("upstream asks the person", func(t *testing.T) {
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Message != "Which note?" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
		if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
			t.Errorf("the upstream's question did not reach the person: %s", text(res))
		}
		// A client that cannot be asked is not offered to the upstream as one
		// that can.
		if res := call(t, alice, "ask_note", map[string]any{}); !strings.Contains(text(res), "cannot ask") {
			t.Errorf("the upstream asked a client without elicitation: %s", text(res))
		}
	})

	t.Run("passthrough", func(t *testing.T) {
		rr, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://readme"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "Notes are short." {
			t.Fatalf("resources/read: %v %+v", err, rr)
		}
		lr, err := alice.ListResources(ctx, nil)
		if err != nil || len(lr.Resources) != 4 { // readme, pid, env, flood
			t.Fatalf("resources/list: %v %+v", err, lr)
		}
		gp, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "summarize", Arguments: map[string]string{"name": "hello"}})
		if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "Summarize the note hello." {
			t.Fatalf("prompts/get: %v %+v", err, gp)
		}
		caps := alice.InitializeResult().Capabilities
		if caps.Resources == nil || caps.Prompts == nil || caps.Tools == nil {
			t.Errorf("the gateway does not announce the upstream's capabilities: %+v", caps)
		}
	})

	t.Run("protected resource", func(t *testing.T) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		base := strings.TrimSuffix(url, "/mcp")
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			var meta oauthex.ProtectedResourceMetadata
			json.NewDecoder(resp.Body).Decode(&meta)
			resp.Body.Close()
			if resp.StatusCode != 200 || meta.Resource != "https://gw.example.com/mcp" {
				t.Errorf("%s: %d %+v", path, resp.StatusCode, meta)
			}
		}
		resp, err = http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("healthz: %d", resp.StatusCode)
		}
	})
}

// TestToolsOnly: everything but tools is refused, and not announced.
func TestToolsOnly(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.ToolsOnly())
	cs := connect(t, serve(t, g), "alice-token", nil)
	if caps := cs.InitializeResult().Capabilities; caps.Resources != nil || caps.Prompts != nil {
		t.Errorf("announces %+v", caps)
	}
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"})
	var re *jsonrpc.Error
	if !errors.As(err, &re) || re.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("resources/read: %v, want method not found", err)
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("read: %s", text(res))
	}
}

// TestNewFailsWithoutUpstream: the gateway does not start in front of
// nothing.
func TestNewFailsWithoutUpstream(t *testing.T) {
	t.Parallel()
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	for _, up := range []gateway.Upstream{{}, {URL: "http://x", Command: "y"}, {URL: "ftp://x"}, {Command: "/nonexistent/upstream"}} {
		if g, err := gateway.New(enf, up, gateway.WithConnectTimeout(2*time.Second)); err == nil {
			g.Close()
			t.Errorf("%+v: New succeeded", up)
		}
	}
	if _, err := gateway.New(enf, gateway.Upstream{URL: "http://127.0.0.1:1"}, gateway.WithBearer(authenticate, nil)); err == nil {
		t.Error("WithBearer without resource metadata was accepted")
	}
}
