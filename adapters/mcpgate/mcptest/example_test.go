package mcptest_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/mcptest"
)

// A test that lists the tools of the pinned server-filesystem, the upstream
// a gateway test stands in front of.
func ExampleServerFilesystem() {
	var t *testing.T // the test's
	cmd := mcptest.ServerFilesystem(t, t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		t.Log(tool.Name)
	}
}

// TestServerFilesystem starts the pinned server and checks it is the
// version pinned and lists its tools.
func TestServerFilesystem(t *testing.T) {
	cmd := mcptest.ServerFilesystem(t, t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range res.Tools {
		found = found || tool.Name == "read_text_file"
	}
	if !found {
		t.Errorf("server-filesystem %s does not list read_text_file", mcptest.ServerFilesystemVersion)
	}
}
