package gate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

// capsManifest's action declares one parameter and an output schema that a
// result can violate once per item.
const capsManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "list.get", "entity": "list", "action_type": "read", "description": "Get a list",
     "required_parameters": [{"name": "name", "type": "string", "description": "List name"}],
     "risk_level": "none", "idempotent": true, "scope": "global",
     "output_schema": {"type": "array", "items": {"type": "integer"}}}
  ]
}`

// wantCapped checks that err lists listed violations and counts omitted.
func wantCapped(t *testing.T, err error, code axerr.Code, listed, omitted int) {
	t.Helper()
	e, ok := axerr.As(err)
	if !ok || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	got, _ := e.Details[axerr.DetailViolationsOmitted].(int)
	if len(e.Violations) != listed || got != omitted {
		t.Fatalf("%d violations listed, %d omitted; want %d and %d", len(e.Violations), got, listed, omitted)
	}
	for i := 1; i < len(e.Violations); i++ {
		if e.Violations[i-1].Path >= e.Violations[i].Path {
			t.Fatalf("violations not in path order: %q before %q", e.Violations[i-1].Path, e.Violations[i].Path)
		}
	}
}

func TestParamsListAtMostMaxViolations(t *testing.T) {
	m := mustParse(t, capsManifest)
	p, err := gate.NewParams(m, false)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"name":"n"`)
	for i := range 500 {
		fmt.Fprintf(&b, `,"u%03d":1`, i)
	}
	b.WriteString("}")
	wantCapped(t, p.Check(call(t, m, "list.get", b.String(), middleware.Principal{ID: "u"})), axerr.CodeUnknownParam, 20, 480)
	p.MaxViolations = 7
	wantCapped(t, p.Check(call(t, m, "list.get", b.String(), middleware.Principal{ID: "u"})), axerr.CodeUnknownParam, 7, 493)
	// Under the cap: every violation, no count.
	e, _ := axerr.As(p.Check(call(t, m, "list.get", `{"name":"n","a":1,"b":2}`, middleware.Principal{ID: "u"})))
	if e == nil || len(e.Violations) != 2 || e.Details[axerr.DetailViolationsOmitted] != nil || strings.Contains(e.Message, "omitted") {
		t.Fatalf("%v", e)
	}
}

func TestPostconditionsListAtMostMaxViolations(t *testing.T) {
	m := mustParse(t, capsManifest)
	g, err := gate.NewPostconditions(m, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	result := make([]any, 300)
	for i := range result {
		result[i] = "x"
	}
	c := call(t, m, "list.get", `{"name":"n"}`, middleware.Principal{ID: "u"})
	wantCapped(t, g.Check(context.Background(), c, middleware.Result{Value: result}), axerr.CodePostconditionFailed, 20, 280)
	g.MaxViolations = 3
	wantCapped(t, g.Check(context.Background(), c, middleware.Result{Value: result}), axerr.CodePostconditionFailed, 3, 297)
}
