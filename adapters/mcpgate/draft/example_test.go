package draft_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/draft"
	"github.com/axgate/axgate/manifest"
)

// The calls of axgate manifest init: connect a client to the upstream
// (here in memory; mcp.CommandTransport or mcp.StreamableClientTransport in
// the command), list its tools, draft, write the manifest to standard
// output and each guess to standard error.
func Example() {
	upstream := mcp.NewServer(&mcp.Implementation{Name: "notes-mcp-server", Version: "1.0.0"}, nil)
	no := false
	upstream.AddTool(&mcp.Tool{
		Name: "deleteNote", Description: "Deletes a note",
		InputSchema: map[string]any{"type": "object", "required": []any{"id"}, "properties": map[string]any{"id": map[string]any{"type": "string", "format": "uuid"}}},
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: &no},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := upstream.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "axgate", Version: "dev"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	tools, err := draft.ListTools(ctx, cs)
	if err != nil {
		log.Fatal(err)
	}
	out, guesses, err := draft.Draft(tools, draft.Options{
		ServerName: cs.InitializeResult().ServerInfo.Name,
		Source:     &manifest.Source{Tool: "axgate manifest init"},
	})
	if err != nil {
		log.Fatal(err)
	}
	m, err := manifest.Parse(out) // the command writes out to standard output
	if err != nil {
		log.Fatal(err)
	}
	a := m.Tool("deleteNote")
	fmt.Println(a.Intent, a.Type, a.RiskLevel, a.ConfirmationRequired, len(a.UpstreamSHA256))
	for _, g := range guesses {
		fmt.Println(g) // the command writes these to standard error
	}
	// Output:
	// notes.delete_note write high true 64
	// /entities/0/name = "notes": made of the server's name "notes-mcp-server": every intent reads notes.<tool>
	// deleteNote: /entities/0/actions/0/intent = "notes.delete_note": the tool name is not a lowercase name of letters, digits and _; rewritten
	// deleteNote: /entities/0/actions/0/risk_level = "high": destructiveHint absent (default true): the tool may destroy what it writes over
	// deleteNote: /entities/0/actions/0/confirmation_required = true: high risk: a person confirms each call
	// deleteNote: /entities/0/actions/0/confirmation_message = "Delete note with id {{id}}?": what a person is asked before each call: the tool's name and at most 3 key parameters (required first, then paths, ids and other strings); reword it to say what the call does
}
