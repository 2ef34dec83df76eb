package middleware_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// BenchmarkSlogAudit is the audit record of one allowed read written as a
// JSON line (slog's JSONHandler, to io.Discard), as `axgate serve` and
// `axgate mcp` write it with --audit stderr.
func BenchmarkSlogAudit(b *testing.B) {
	sink := middleware.SlogAudit(slog.New(slog.NewJSONHandler(io.Discard, nil)))
	r := middleware.AuditRecord{
		Time: time.Now(), Duration: 183 * time.Microsecond, Intent: "doc.read", Tool: "read",
		ActionType: manifest.ActionType("read"), RiskLevel: manifest.RiskLevel("none"),
		PrincipalID: "agent", Tenant: "t0", Decision: "allow", Params: []string{"path"},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sink.Audit(ctx, r)
	}
}
