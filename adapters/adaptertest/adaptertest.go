// Package adaptertest checks that an adapter keeps the contract every axgate adapter keeps.
//
// Run it from the adapter's tests with a Harness that serves the suite's
// manifest through the adapter and calls its tools as an agent would:
//
//	func TestConformance(t *testing.T) {
//		adaptertest.Run(t, adaptertest.Harness{Serve: serve})
//	}
//
// Each subtest serves a new enforcer. The suite checks that an allowed call
// reaches the tool with the arguments the gates checked, as the transport's
// principal; that an undeclared tool, a missing role, bad arguments, a
// missing confirmation and arguments that are not I-JSON are refused with
// their AXAG code and details before the tool runs; and that the tool's
// errors reach the caller.
package adaptertest

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

//go:embed manifest.json
var manifestJSON []byte

// undeclared is the tool the harness exposes that the manifest does not declare.
const undeclared = "note_undeclared"

// Tool is the tool behind the adapter. The harness runs it for every tool
// it exposes, with the tool's name and the arguments as the adapter hands
// them to a tool (any value that encodes to JSON), and returns its value or
// error to the caller the adapter's way.
type Tool func(ctx context.Context, name string, args any) (any, error)

// Invoke calls the tool name through the adapter with args, a JSON text, and
// returns what the caller received. It fails t when the call could not be
// made.
type Invoke func(t *testing.T, name, args string) Outcome

// Outcome is what a caller received from a call.
type Outcome struct {
	// Code is the AXAG code of the refusal the caller received, empty when
	// the call succeeded.
	Code string
	// Details are the refusal's details, decoded from JSON.
	Details map[string]any
	// Result is the tool's value, decoded from JSON, when the call succeeded.
	Result any
}

// Harness connects the suite to one adapter.
type Harness struct {
	// Serve builds the adapter around e for the caller p and returns how to
	// call it. The adapter exposes every tool in tools, each running tool,
	// and learns p from its transport (a session, a credential, a context),
	// never from the arguments. Serve registers its cleanup with t.
	Serve func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, tools []string, tool Tool) Invoke
	// DecodedArguments says the adapter receives arguments already decoded
	// (a map, not JSON text): the suite then skips the inputs only JSON text
	// can hold, such as a key given twice.
	DecodedArguments bool
}

var (
	reader = middleware.Principal{ID: "alice", Roles: []string{"reader"}}
	admin  = middleware.Principal{ID: "root", Roles: []string{"admin"}}
)

// Run runs the suite against the adapter h serves.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Serve == nil {
		t.Fatal("adaptertest: Harness.Serve is nil")
	}
	s := &suite{h: h}
	t.Run("AllowedCallRunsWithCheckedArguments", s.allowed)
	t.Run("UndeclaredToolIsRefused", s.undeclaredTool)
	t.Run("MissingRoleIsRefused", s.missingRole)
	t.Run("BadArgumentsAreRefusedWithEveryViolation", s.badArguments)
	t.Run("MissingConfirmationIsRefused", s.missingConfirmation)
	t.Run("ArgumentsThatAreNotIJSONAreRefused", s.notIJSON)
	t.Run("ToolErrorsReachTheCaller", s.toolErrors)
	t.Run("PrincipalComesFromTheTransport", s.principal)
}

type suite struct{ h Harness }

// seen records what the gates checked and what the tool received.
type seen struct {
	mu        sync.Mutex
	checked   any
	principal middleware.Principal
	runs      int
	args      any
}

// serve builds an enforcer over the suite's manifest and serves it for p.
func (s *suite) serve(t *testing.T, p middleware.Principal) (Invoke, *seen) {
	t.Helper()
	m, err := manifest.Parse(manifestJSON)
	if err != nil {
		t.Fatalf("adaptertest: the suite's manifest: %v", err)
	}
	rec := &seen{}
	record := middleware.Stage{Name: "adaptertest_checked", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		v, err := call.Value()
		if err != nil {
			return middleware.Result{}, err
		}
		rec.mu.Lock()
		rec.checked, rec.principal = normal(t, v), call.Principal
		rec.mu.Unlock()
		return next.Invoke(ctx, call)
	}}
	e, err := axgate.New(m, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, record)
	}))
	if err != nil {
		t.Fatalf("adaptertest: axgate.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	tools := []string{undeclared}
	for _, tl := range e.Tools() {
		tools = append(tools, tl.Name)
	}
	tool := func(_ context.Context, name string, args any) (any, error) {
		rec.mu.Lock()
		rec.runs++
		rec.args = normal(t, args)
		rec.mu.Unlock()
		if m, ok := args.(map[string]any); ok {
			switch m["query"] {
			case "fail":
				return nil, errors.New("adaptertest: the tool failed")
			case "refuse":
				return nil, axerr.New(axerr.CodePreconditionFailed, "no note matches").With("reason", "adaptertest_refused")
			}
		}
		return map[string]any{"tool": name, "ok": true}, nil
	}
	inv := s.h.Serve(t, e, p, tools, tool)
	if inv == nil {
		t.Fatal("adaptertest: Harness.Serve returned no Invoke")
	}
	return inv, rec
}

// normal is v as JSON decodes it, so that values the adapter and the gates
// spell differently (int64 and float64, structs and maps) compare equal.
func normal(t *testing.T, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Errorf("adaptertest: the value %v does not encode as JSON: %v", v, err)
		return nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Errorf("adaptertest: %s: %v", raw, err)
	}
	return out
}

func (r *seen) ran() (int, any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs, r.args
}

// refused checks that out is a refusal with code and the tool did not run.
func refused(t *testing.T, out Outcome, rec *seen, codes ...axerr.Code) {
	t.Helper()
	if !slices.Contains(codes, axerr.Code(out.Code)) {
		t.Fatalf("outcome %+v; want a refusal with code %v", out, codes)
	}
	if n, _ := rec.ran(); n != 0 {
		t.Fatalf("the tool ran %d times for a refused call", n)
	}
}

func (s *suite) allowed(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_search", `{"page": 2, "query": "lamp", "filter": {"tag": "home"}}`)
	if out.Code != "" {
		t.Fatalf("refused: %s %v", out.Code, out.Details)
	}
	n, args := rec.ran()
	if n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	rec.mu.Lock()
	checked := rec.checked
	rec.mu.Unlock()
	want := map[string]any{"query": "lamp", "page": 2.0, "filter": map[string]any{"tag": "home"}}
	if !reflect.DeepEqual(args, checked) || !reflect.DeepEqual(checked, want) {
		t.Fatalf("the tool got %v, the gates checked %v, want %v", args, checked, want)
	}
	if res := normal(t, out.Result); !reflect.DeepEqual(res, map[string]any{"tool": "note_search", "ok": true}) {
		t.Fatalf("the caller got %v, want the tool's value", res)
	}
}

func (s *suite) undeclaredTool(t *testing.T) {
	call, rec := s.serve(t, reader)
	refused(t, call(t, undeclared, `{}`), rec, axerr.CodeIntentNotFound)
}

func (s *suite) missingRole(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_purge", `{}`)
	refused(t, out, rec, axerr.CodeRoleInsufficient)
	if roles, _ := out.Details["required_roles"].([]any); !slices.Equal(roles, []any{"admin"}) || out.Details["reason"] != "role_missing" {
		t.Fatalf("details %v; want required_roles [admin], reason role_missing", out.Details)
	}
	call, rec = s.serve(t, admin)
	if out := call(t, "note_purge", `{}`); out.Code != "" {
		t.Fatalf("an admin was refused: %s %v", out.Code, out.Details)
	}
	if n, _ := rec.ran(); n != 1 {
		t.Fatalf("the tool ran %d times for the admin, want once", n)
	}
}

func (s *suite) badArguments(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_search", `{"query": 7, "page": 0, "colour": "red"}`)
	refused(t, out, rec, axerr.CodeInvalidType, axerr.CodeOutOfRange, axerr.CodeUnknownParam)
	if got := paths(out); !slices.Equal(got, []string{"/colour", "/page", "/query"}) {
		t.Fatalf("violations at %v; want /colour, /page and /query (details %v)", got, out.Details)
	}
	out = call(t, "note_search", `{"page": 1}`)
	refused(t, out, rec, axerr.CodeMissingParam)
	if got := paths(out); !slices.Equal(got, []string{"/query"}) {
		t.Fatalf("violations at %v; want /query (details %v)", got, out.Details)
	}
}

// paths returns the sorted paths of the refusal's violations.
func paths(out Outcome) []string {
	vs, _ := out.Details["violations"].([]any)
	var ps []string
	for _, v := range vs {
		m, _ := v.(map[string]any)
		p, _ := m["path"].(string)
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (s *suite) missingConfirmation(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_publish", `{"text": "hello"}`)
	refused(t, out, rec, axerr.CodeConfirmationMissing)
	for _, k := range []string{"args_sha256", "confirmation_message", "token_type"} {
		if v, _ := out.Details[k].(string); v == "" {
			t.Errorf("details %v; want %s", out.Details, k)
		}
	}
	if out.Details["intent"] != "note.publish" || out.Details["risk_level"] != "high" {
		t.Errorf("details %v; want intent note.publish, risk_level high", out.Details)
	}
}

func (s *suite) notIJSON(t *testing.T) {
	var wide strings.Builder
	wide.WriteByte('{')
	for i := range 1001 {
		if i > 0 {
			wide.WriteByte(',')
		}
		wide.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	wide.WriteByte('}')
	cases := []struct {
		name, args   string
		code, reason string
		paths        []string
		textOnly     bool
	}{
		{"KeyGivenTwice", `{"query": "lamp", "query": "rm -rf"}`, "AXGATE_INVALID_ARGUMENTS", "", []string{"/query"}, true},
		{"KeysEqualUnderCaseFolding", `{"query": "lamp", "QUERY": "rm -rf"}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", []string{"/QUERY", "/query"}, false},
		{"KeysEqualUnderLongS", `{"query": "lamp", "filter": {"size": "a", "\u017fize": "b"}}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", []string{"/filter/size", "/filter/\u017fize"}, false},
		{"IntegerAboveTwoTo53", `{"query": "lamp", "page": 9007199254740993}`, "AXAG_INVALID_TYPE", "number_not_interoperable", []string{"/page"}, false},
		{"ObjectWiderThanTheLimit", `{"query": "lamp", "filter": ` + wide.String() + `}`, "AXGATE_INVALID_ARGUMENTS", "too_many_members", []string{"/filter"}, false},
	}
	call, rec := s.serve(t, reader)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.textOnly && s.h.DecodedArguments {
				t.Skip("the adapter receives decoded arguments")
			}
			out := call(t, "note_search", tc.args)
			refused(t, out, rec, axerr.Code(tc.code))
			if tc.reason != "" && out.Details["reason"] != tc.reason {
				t.Errorf("details %v; want reason %s", out.Details, tc.reason)
			}
			if got := paths(out); len(got) != 1 || !slices.Contains(tc.paths, got[0]) {
				t.Errorf("violations at %v; want one of %v", got, tc.paths)
			}
		})
	}
}

func (s *suite) toolErrors(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_search", `{"query": "fail"}`)
	if out.Code != string(axerr.CodeToolFailed) {
		t.Errorf("a failing tool: outcome %+v; want %s", out, axerr.CodeToolFailed)
	}
	out = call(t, "note_search", `{"query": "refuse"}`)
	if out.Code != string(axerr.CodePreconditionFailed) || out.Details["reason"] != "adaptertest_refused" {
		t.Errorf("a tool's own refusal: outcome %+v; want %s with its reason", out, axerr.CodePreconditionFailed)
	}
	if n, _ := rec.ran(); n != 2 {
		t.Errorf("the tool ran %d times, want twice", n)
	}
}

func (s *suite) principal(t *testing.T) {
	call, rec := s.serve(t, reader)
	out := call(t, "note_edit", `{"user_id": "mallory", "text": "hi"}`)
	refused(t, out, rec, axerr.CodeScopeViolation)
	out = call(t, "note_edit", `{"user_id": "alice", "text": "hi"}`)
	if out.Code != "" {
		t.Fatalf("alice editing her own note was refused: %s %v", out.Code, out.Details)
	}
	rec.mu.Lock()
	got := rec.principal
	rec.mu.Unlock()
	if got.ID != reader.ID || !slices.Equal(got.Roles, reader.Roles) {
		t.Fatalf("the gates saw the principal %+v, want %+v", got, reader)
	}
}
