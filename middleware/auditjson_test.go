package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// auditLines returns what SlogAudit writes for r through
// NewJSONAuditHandler and through slog's own JSONHandler.
func auditLines(r middleware.AuditRecord) (direct, viaSlog string) {
	var a, b bytes.Buffer
	middleware.SlogAudit(slog.New(middleware.NewJSONAuditHandler(&a))).Audit(context.Background(), r)
	middleware.SlogAudit(slog.New(slog.NewJSONHandler(&b, nil))).Audit(context.Background(), r)
	return a.String(), b.String()
}

// list splits s into a string list on '|' ("" is nil).
func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

// FuzzJSONAuditHandlerAsSlog: the audit line NewJSONAuditHandler writes is
// the one slog's JSONHandler writes for the same record, byte for byte,
// whatever the fields hold (quotes, control bytes, invalid UTF-8, U+2028,
// HTML, empty and nil lists), refusals and allowed calls alike.
func FuzzJSONAuditHandlerAsSlog(f *testing.F) {
	f.Add("doc.read", "read", "agent", "t0", "allow", "", "", "path", "", "", int64(1700000000123456789), int64(183000), false, false)
	f.Add("i\"\\\b\f\n\r\t\x00\x1f\x7f", "<t&>", "p\xff\xfe", "\u2028\u2029", "deny", "AXAG_X", "g", "a|+1 undeclared|\b\f\"<>&\xff\u2028", "w1|w2", "s", int64(-1), int64(-5), true, true)
	f.Add("", "", "", "", "", "", "", "", "", "", int64(0), int64(0), false, true)
	f.Fuzz(func(t *testing.T, intent, tool, principal, tenant, decision, code, gate, params, warnings, effects string, nanos, dur int64, flag1, flag2 bool) {
		r := middleware.AuditRecord{
			Time: time.Unix(0, nanos).In(time.FixedZone("z", int(nanos%50000))), Duration: time.Duration(dur),
			Intent: intent, Tool: tool, PrincipalID: principal, Tenant: tenant, Decision: decision,
			Code: axerr.Code(code), Gate: gate, Params: list(params), Warnings: list(warnings), SideEffects: list(effects),
			ActionType: manifest.ActionType(gate), RiskLevel: manifest.RiskLevel(tenant), CheckOnly: flag1, Replayed: flag2,
		}
		if flag1 {
			r.CallID, r.ConfirmationJTI, r.ConfirmationRequestID, r.TraceID, r.SpanID = tool, principal, intent, gate, code
			r.Approvers, r.ApprovalRequestID = list(warnings), effects
		}
		if flag2 {
			r.ConfirmationElicited = true
			r.Params = []string{}
		}
		if direct, viaSlog := auditLines(r); direct != viaSlog {
			t.Errorf("NewJSONAuditHandler wrote\n%q\nslog's JSONHandler\n%q", direct, viaSlog)
		}
	})
}

// TestJSONAuditHandlerOtherRecords: what the direct path leaves to slog
// (recorded arguments, a zero time, a year past 9999, other log records,
// a handler with attributes) is written as slog's JSONHandler writes it.
func TestJSONAuditHandlerOtherRecords(t *testing.T) {
	for _, r := range []middleware.AuditRecord{
		{Time: time.Unix(1700000000, 0), Decision: "allow", Arguments: json.RawMessage(`{ "a" : [1, 2] }`)},
		{Time: time.Unix(1700000000, 0), Decision: "allow", Arguments: json.RawMessage(`{"a":`)},
		{Decision: "allow"},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Decision: "allow"},
	} {
		if direct, viaSlog := auditLines(r); direct != viaSlog {
			t.Errorf("NewJSONAuditHandler wrote\n%q\nslog's JSONHandler\n%q", direct, viaSlog)
		}
	}
	var a, b bytes.Buffer
	slog.New(middleware.NewJSONAuditHandler(&a)).With("k", 1).WithGroup("g").Info("m", "x", 2)
	slog.New(slog.NewJSONHandler(&b, nil)).With("k", 1).WithGroup("g").Info("m", "x", 2)
	noTime := regexp.MustCompile(`"time":"[^"]*",`)
	if got, want := noTime.ReplaceAllString(a.String(), ""), noTime.ReplaceAllString(b.String(), ""); got != want || !strings.Contains(got, `"g":{"x":2}`) {
		t.Errorf("a plain record:\n%s\nwant\n%s", a.String(), b.String())
	}
}

// TestJSONAuditHandlerLinesWhole: records written at once from many
// goroutines, by the direct path and by slog's beside it, are whole lines.
func TestJSONAuditHandlerLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	h := middleware.NewJSONAuditHandler(&buf)
	sink := middleware.SlogAudit(slog.New(h))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				r := middleware.AuditRecord{Time: time.Now(), Decision: "allow", Params: []string{strings.Repeat("p", 100)}}
				if i%2 == 0 {
					r.Arguments = json.RawMessage(`{"a":1}`) // slog's path
				}
				sink.Audit(context.Background(), r)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines; want 800", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a line is not JSON: %q", l)
		}
	}
}
