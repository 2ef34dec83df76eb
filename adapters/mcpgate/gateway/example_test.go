package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// noteArgs are the arguments of the upstream's tools.
type noteArgs struct {
	Name string `json:"name"`
	Text string `json:"text,omitempty"`
}

// exampleUpstream is an MCP server nobody should reach but the gateway,
// written here with the Go SDK (the gateway does not care in what language).
func exampleUpstream() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1.0.0"}, nil)
	notes := map[string]string{"hello": "world"}
	mcp.AddTool(s, &mcp.Tool{Name: "read_note", Description: "Read a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, noteArgs, error) {
			return nil, noteArgs{Name: a.Name, Text: notes[a.Name]}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_note", Description: "Write a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, any, error) {
			notes[a.Name] = a.Text
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "drop_all", Description: "Delete every note."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			clear(notes)
			return nil, nil, nil
		})
	return s
}

// The gateway in front of an upstream over streamable HTTP, and an agent
// that uses it: it lists only the tools the manifest declares, reads, and is
// refused a write that needs the person's confirmation (its client cannot
// ask the person).
func Example() {
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return exampleUpstream() }, nil))
	defer upstream.Close()

	m, err := manifest.LoadFile("testdata/notes.axag.json") // read_note, and write_note with confirmation
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()
	// One known user here; in production, gateway.WithBearer authenticates
	// each caller with a bearer token.
	me := middleware.Principal{ID: "alice"}
	gw, err := gateway.New(enf, gateway.Upstream{URL: upstream.URL},
		gateway.WithPrincipal(mcpgate.StaticPrincipal(me)))
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	front := httptest.NewServer(gw.Handler()) // /mcp, /healthz
	defer front.Close()

	ctx := context.Background()
	agent := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1.0.0"}, nil)
	cs, err := agent.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Println("listed:", t.Name) // not drop_all: the manifest does not declare it
	}
	read, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	out, _ := json.Marshal(read.StructuredContent)
	fmt.Println("read_note:", string(out))
	write, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "hello", "text": "moon"}})
	if err != nil {
		log.Fatal(err)
	}
	refusal, _ := json.Marshal(write.StructuredContent)
	var env struct{ Error struct{ Code string } }
	json.Unmarshal(refusal, &env)
	fmt.Println("write_note:", env.Error.Code)
	// Output:
	// listed: read_note
	// listed: write_note
	// read_note: {"name":"hello","text":"world"}
	// write_note: AXAG_CONFIRMATION_MISSING
}
