package middleware_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/axgate/axgate/middleware"
)

// Attack: the name of a tool the manifest does not declare is the caller's
// choice, as an undeclared argument's key is. The span bounds it
// (gen_ai.tool.name); the audit record (file, stdout, OTLP logs) must too,
// or a caller writes a megabyte, or an argument value, into the audit log
// with every refused call.
func TestAuditToolNameOfUnknownToolIsBounded(t *testing.T) {
	r := newTelemetryRig(t, middleware.TelemetryConfig{}, true)
	smuggled := "card=4111111111111111;" + strings.Repeat("A", 64<<10)
	call := middleware.NewCall(smuggled, json.RawMessage(`{}`), middleware.Principal{ID: "alice"})
	if err := r.run(t, call, okTool); err == nil {
		t.Fatal("an unknown tool was allowed")
	}
	if len(r.audit) != 1 {
		t.Fatalf("audit = %d records", len(r.audit))
	}
	if got := r.audit[0].Tool; len(got) > 128 {
		t.Errorf("the audit record's tool is %d bytes of the caller's choice; want it bounded like the span's", len(got))
	}
}
