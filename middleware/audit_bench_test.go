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
// JSON line (to io.Discard): through slog's JSONHandler ("slog") and
// through NewJSONAuditHandler, as `axgate serve` and `axgate mcp` write it
// with --audit stderr ("direct"). Both write the same line.
func BenchmarkSlogAudit(b *testing.B) {
	r := middleware.AuditRecord{
		Time: time.Now(), Duration: 183 * time.Microsecond, Intent: "doc.read", Tool: "read",
		ActionType: manifest.ActionType("read"), RiskLevel: manifest.RiskLevel("none"),
		PrincipalID: "agent", Tenant: "t0", Decision: "allow", Params: []string{"path"},
	}
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{{"slog", slog.NewJSONHandler(io.Discard, nil)}, {"direct", middleware.NewJSONAuditHandler(io.Discard)}} {
		b.Run(c.name, func(b *testing.B) {
			sink := middleware.SlogAudit(slog.New(c.h))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sink.Audit(ctx, r)
			}
		})
	}
}
