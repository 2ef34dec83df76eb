package draft

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTools bounds how many tools ListTools reads from an upstream, and
// maxPages how many pages: an upstream that pages without end (or repeats a
// cursor) is refused rather than read until memory runs out.
const (
	maxTools = 10000
	maxPages = 1000
)

// ListTools returns every tool the upstream lists, following tools/list
// pages to the end, in the upstream's order. It fails when a page fails,
// when the upstream hands out a cursor it handed out before, or when it
// lists more than maxTools tools or maxPages pages.
func ListTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	if cs == nil {
		return nil, errors.New("draft: ListTools without a client session")
	}
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	seen := map[string]bool{}
	for page := 1; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("draft: tools/list (page %d): %w", page, err)
		}
		tools = append(tools, res.Tools...)
		if len(tools) > maxTools {
			return nil, fmt.Errorf("draft: the upstream lists more than %d tools", maxTools)
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("draft: the upstream repeats the tools/list cursor %q", res.NextCursor)
		}
		if page >= maxPages {
			return nil, fmt.Errorf("draft: the upstream lists more than %d pages of tools", maxPages)
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}
