package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/axgate/axgate/middleware"
)

// TestSlogAuditLineExact pins the JSON line of the slog audit sink byte for
// byte, every optional field set and none: its keys, their order and their
// values' encoding (what a log pipeline parses).
func TestSlogAuditLineExact(t *testing.T) {
	var buf bytes.Buffer
	sink := middleware.SlogAudit(slog.New(slog.NewJSONHandler(&buf, nil)))
	sink.Audit(context.Background(), middleware.AuditRecord{
		Time: time.Unix(1700000000, 123456789).UTC(), Duration: 5 * time.Millisecond, Intent: "i", Tool: "t<&>", CallID: "c",
		ActionType: "write", RiskLevel: "high", PrincipalID: `p"`, Tenant: "te", Decision: "deny", Code: "AXAG_X", Gate: "g",
		CheckOnly: true, Params: []string{"a", "+1 undeclared"}, Arguments: json.RawMessage(`{ "a" : 1 }`),
		ConfirmationJTI: "j", ConfirmationElicited: true, ConfirmationRequestID: "cr", Approvers: []string{"b"},
		ApprovalRequestID: "ar", Replayed: true, Warnings: []string{"w"}, SideEffects: []string{"s"}, TraceID: "tr", SpanID: "sp",
	})
	sink.Audit(context.Background(), middleware.AuditRecord{Time: time.Unix(1700000000, 0).UTC(), Decision: "allow"})
	want := `{"time":"2023-11-14T22:13:20.123456789Z","level":"WARN","msg":"axgate decision","intent":"i","tool":"t<&>","principal":"p\"","tenant":"te","risk_level":"high","decision":"deny","code":"AXAG_X","gate":"g","call_id":"c","action_type":"write","check_only":true,"params":["a","+1 undeclared"],"arguments":{"a":1},"confirmation_jti":"j","confirmation_elicited":true,"confirmation_request_id":"cr","approvers":["b"],"approval_request_id":"ar","replayed":true,"warnings":["w"],"side_effects":["s"],"duration":5000000,"trace_id":"tr","span_id":"sp"}
{"time":"2023-11-14T22:13:20Z","level":"INFO","msg":"axgate decision","intent":"","tool":"","principal":"","tenant":"","risk_level":"","decision":"allow","params":[],"duration":0}
`
	if got := buf.String(); got != want {
		t.Errorf("audit lines:\n%s\nwant:\n%s", got, want)
	}
}
