package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeLocal serves one local client over t, as ServeStdio does over stdio.
func ServeLocal(g *Gateway, ctx context.Context, t mcp.Transport) error { return g.serveLocal(ctx, t) }
