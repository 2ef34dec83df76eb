package axgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// shopFull is the project's full test manifest (testdata/axag).
var shopFull = fixtures.Manifest("shop-full.json")

func loadManifest(t testing.TB, path string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fullEnforcer enforces shop-full.json. Its preconditions are prose that
// no checker is bound to in these tests, so they are allowed to stay unbound.
func fullEnforcer(t testing.TB, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	e, err := axgate.New(loadManifest(t, shopFull), append(coreTestOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// spy is a tool that counts its invocations.
type spy struct{ calls atomic.Int32 }

func (s *spy) Invoke(_ context.Context, c *middleware.Call) (middleware.Result, error) {
	s.calls.Add(1)
	return middleware.Result{Value: map[string]any{"ok": true}}, nil
}

var principal = middleware.Principal{ID: "user-1", Tenant: "acme", Roles: []string{"member"}}

const uuid = "3fa85f64-5717-4562-b3fc-2c963f66afa6"

type violation struct {
	path string
	code axerr.Code
}

// TestParamsValidFull is the table of the core issue: each kind of bad
// argument on shop-full.json, with its code and JSON Pointer path.
func TestParamsValidFull(t *testing.T) {
	e := fullEnforcer(t)
	formats, err := axgate.New(loadManifest(t, filepath.Join("testdata", "formats.json")))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		enf  *axgate.Enforcer
		tool string
		args string
		want []violation
	}{
		{"missing required", e, "product_search", `{}`, []violation{{"/query", axerr.CodeMissingParam}}},
		{"wrong type", e, "product_search", `{"query": 42}`, []violation{{"/query", axerr.CodeInvalidType}}},
		{"below min", e, "product_search", `{"query": "x", "page": 0}`, []violation{{"/page", axerr.CodeOutOfRange}}},
		{"above max", e, "product_search", `{"query": "x", "limit": 101}`, []violation{{"/limit", axerr.CodeOutOfRange}}},
		{"over maxLength", e, "order_place", `{"cart_id": "` + uuid + `", "shipping_address_id": "a", "notes": "` + strings.Repeat("n", 501) + `"}`, []violation{{"/notes", axerr.CodeOutOfRange}}},
		{"bad enum", e, "product_search", `{"query": "x", "category": "food"}`, []violation{{"/category", axerr.CodeInvalidEnum}}},
		{"bad uuid", e, "cart_add_item", `{"product_id": "not-a-uuid", "quantity": 1}`, []violation{{"/product_id", axerr.CodeInvalidFormat}}},
		{"bad email", formats, "contact_create", `{"id": "` + uuid + `", "email": "nobody", "birthday": "1990-01-01"}`, []violation{{"/email", axerr.CodeInvalidFormat}}},
		{"bad date", formats, "contact_create", `{"id": "` + uuid + `", "email": "a@b.example", "birthday": "1990-13-45"}`, []violation{{"/birthday", axerr.CodeInvalidFormat}}},
		{"bad url", formats, "contact_create", `{"id": "` + uuid + `", "email": "a@b.example", "birthday": "1990-01-01", "homepage": "::"}`, []violation{{"/homepage", axerr.CodeInvalidFormat}}},
		{"unknown parameter", e, "product_search", `{"query": "x", "qeury": "y"}`, []violation{{"/qeury", axerr.CodeUnknownParam}}},
		{"several at once", e, "order_place", `{"shipping_address_id": 7, "notes": "` + strings.Repeat("n", 501) + `", "coupon": "X"}`, []violation{
			{"/cart_id", axerr.CodeMissingParam},
			{"/coupon", axerr.CodeUnknownParam},
			{"/notes", axerr.CodeOutOfRange},
			{"/shipping_address_id", axerr.CodeInvalidType},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool := &spy{}
			_, err := tc.enf.Wrap(tool).Invoke(context.Background(), middleware.NewCall(tc.tool, json.RawMessage(tc.args), principal))
			ae, ok := axerr.As(err)
			if !ok {
				t.Fatalf("err = %v; want an *errors.Error", err)
			}
			if tool.calls.Load() != 0 {
				t.Fatal("the tool ran although the parameters were refused")
			}
			if ae.Code != tc.want[0].code || ae.HTTPStatus() != 400 || ae.Gate != "params" {
				t.Errorf("code %s status %d gate %q; want %s 400 params", ae.Code, ae.HTTPStatus(), ae.Gate, tc.want[0].code)
			}
			if len(ae.Violations) != len(tc.want) {
				t.Fatalf("violations = %+v; want %d", ae.Violations, len(tc.want))
			}
			for i, w := range tc.want {
				v := ae.Violations[i]
				if v.Path != w.path || v.Code != w.code || v.Message == "" || v.Keyword == "" {
					t.Errorf("violation %d = %+v; want %s at %s", i, v, w.code, w.path)
				}
			}
			if ae.Intent == "" || ae.Suggestion == "" {
				t.Errorf("intent %q suggestion %q: an agent needs both", ae.Intent, ae.Suggestion)
			}
		})
	}
}

func TestValidArgumentsReachTheTool(t *testing.T) {
	e := fullEnforcer(t)
	tool := &spy{}
	res, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"lamp","limit":10}`), principal))
	if err != nil || tool.calls.Load() != 1 || res.Value == nil {
		t.Fatalf("Invoke = %v, %v; calls %d", res, err, tool.calls.Load())
	}
}

func TestIntentNotFound(t *testing.T) {
	e := fullEnforcer(t)
	tool := &spy{}
	_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("order_plase", json.RawMessage(`{}`), principal))
	ae, ok := axerr.As(err)
	if !ok || ae.Code != axerr.CodeIntentNotFound || ae.HTTPStatus() != 404 || ae.Gate != "intent" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(ae.Suggestion, "order_place") || tool.calls.Load() != 0 {
		t.Errorf("suggestion %q, calls %d", ae.Suggestion, tool.calls.Load())
	}
}

// TestBadInputNeverPanics sends what a hostile or broken client sends.
func TestBadInputNeverPanics(t *testing.T) {
	e := fullEnforcer(t, axgate.WithLimits(middleware.Limits{MaxBytes: 1024, MaxDepth: 8, MaxMembers: 6}))
	cases := map[string]struct {
		args string
		code axerr.Code
	}{
		"not json":         {`{"query":`, axerr.CodeInvalidArguments},
		"array":            {`["query"]`, axerr.CodeInvalidArguments},
		"invalid utf-8":    {"{\"query\":\"\xff\xfe\"}", axerr.CodeInvalidArguments},
		"duplicate key":    {`{"query":"a","query":"b"}`, axerr.CodeInvalidArguments},
		"too deep":         {`{"query":"a","x":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, axerr.CodeInvalidArguments},
		"too large":        {`{"query":"` + strings.Repeat("a", 4096) + `"}`, axerr.CodePayloadTooLarge},
		"number overflow":  {`{"query":"a","page":1e999}`, axerr.CodeInvalidType},
		"big integer":      {`{"query":"a","page":9007199254740993}`, axerr.CodeInvalidType},
		"rounded decimal":  {`{"query":"a","page":0.10000000000000001}`, axerr.CodeInvalidType},
		"folded keys":      {`{"query":"a","QUERY":"b"}`, axerr.CodeInvalidArguments},
		"too many members": {`{"query":"a","x":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}}`, axerr.CodeInvalidArguments},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tool := &spy{}
			_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(tc.args), principal))
			if !errors.Is(err, tc.code) {
				t.Fatalf("err = %v; want %s", err, tc.code)
			}
			if tool.calls.Load() != 0 {
				t.Fatal("the tool ran")
			}
		})
	}
}

func TestToolErrorsAreSafe(t *testing.T) {
	e := fullEnforcer(t)
	failing := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, errors.New("open /srv/secret/db.sqlite: permission denied")
	})
	_, err := e.Wrap(failing).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal))
	ae, ok := axerr.As(err)
	if !ok || ae.Code != axerr.CodeToolFailed || ae.HTTPStatus() != 502 || ae.Gate != "tool" {
		t.Fatalf("err = %v", err)
	}
	data, _ := json.Marshal(ae)
	if strings.Contains(string(data), "/srv/secret") {
		t.Errorf("envelope leaks the cause: %s", data)
	}
	passthrough := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, axerr.New(axerr.CodePreconditionFailed, "cart is empty")
	})
	_, err = e.Wrap(passthrough).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal))
	if !errors.Is(err, axerr.CodePreconditionFailed) {
		t.Errorf("a tool's *errors.Error was not passed through: %v", err)
	}
}

func TestCheckNeverInvokes(t *testing.T) {
	e := fullEnforcer(t)
	if err := e.Check(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal)); err != nil {
		t.Errorf("Check(valid) = %v", err)
	}
	err := e.Check(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{}`), principal))
	if !errors.Is(err, axerr.CodeMissingParam) {
		t.Errorf("Check(invalid) = %v", err)
	}
}

func TestUnknownParamsOption(t *testing.T) {
	e := fullEnforcer(t, axgate.WithUnknownParams())
	tool := &spy{}
	if _, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x","extra":1}`), principal)); err != nil {
		t.Fatalf("extra argument refused although allowed: %v", err)
	}
	for _, tl := range e.Tools() {
		if tl.Name == "product_search" && tl.InputSchema["additionalProperties"] != nil {
			t.Error("Tools() shows additionalProperties although unknown parameters are allowed")
		}
	}
}

func TestNewRefusesNil(t *testing.T) {
	if _, err := axgate.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

// A call marked check-only that goes through Wrap must not run the tool: it
// would run without its tokens spent or its rate limit charged.
func TestCheckOnlyCallNeverRuns(t *testing.T) {
	e := fullEnforcer(t)
	tool := &spy{}
	call := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal)
	call.SetCheckOnly(true)
	_, err := e.Wrap(tool).Invoke(context.Background(), call)
	if !errors.Is(err, axerr.CodeInternal) || tool.calls.Load() != 0 {
		t.Fatalf("err = %v, calls %d; want AXGATE_INTERNAL and no run", err, tool.calls.Load())
	}
}

// An action from another load of the manifest has no compiled schema in this
// enforcer; it must be refused, not waved through.
func TestForeignActionRefused(t *testing.T) {
	e := fullEnforcer(t)
	other := loadManifest(t, shopFull)
	tool := &spy{}
	call := middleware.NewCall("product_search", json.RawMessage(`{"evil":true}`), principal)
	call.Action = other.Tool("product_search")
	_, err := e.Wrap(tool).Invoke(context.Background(), call)
	if !errors.Is(err, axerr.CodeInternal) || tool.calls.Load() != 0 {
		t.Fatalf("err = %v, calls %d; want AXGATE_INTERNAL and no run", err, tool.calls.Load())
	}
}

// A tool that returns a shared, package-level refusal must get it back
// unchanged after the chain annotated its copy.
func TestSharedErrorsAreNotMutated(t *testing.T) {
	shared := axerr.New(axerr.CodePreconditionFailed, "closed for the night")
	e := fullEnforcer(t)
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, shared
	})
	_, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal))
	ae, ok := axerr.As(err)
	if !ok || ae.Gate != "tool" {
		t.Fatalf("err = %v", err)
	}
	if shared.Gate != "" || shared.Intent != "" || shared.Details != nil {
		t.Fatalf("the shared error was changed: %+v", shared)
	}
}

func TestExecutedIsMarked(t *testing.T) {
	e := fullEnforcer(t)
	ran := middleware.NewCall("product_search", json.RawMessage(`{"query":"x"}`), principal)
	refused := middleware.NewCall("product_search", json.RawMessage(`{}`), principal)
	tool := e.Wrap(&spy{})
	_, _ = tool.Invoke(context.Background(), ran)
	_, _ = tool.Invoke(context.Background(), refused)
	if !ran.Executed() || refused.Executed() {
		t.Fatalf("executed: ran %v refused %v", ran.Executed(), refused.Executed())
	}
}

func TestCheckHandlers(t *testing.T) {
	e := fullEnforcer(t)
	var all []string
	for _, tl := range e.Tools() {
		all = append(all, tl.Name)
	}
	if err := e.CheckHandlers(all); err != nil {
		t.Fatalf("every tool bound: %v", err)
	}
	err := e.CheckHandlers(append(all[1:], "order_cancel"))
	if err == nil || !strings.Contains(err.Error(), "no handler for "+all[0]) || !strings.Contains(err.Error(), "does not declare: order_cancel") {
		t.Fatalf("err = %v; want the missing and the unknown named", err)
	}
}

// TestWrapRefusesAWrappedTool: wrapping what Wrap returned would run every
// gate twice (a confirmed call would find its token spent by the first
// run); such a tool is refused: every call is AXGATE_INTERNAL and the tool
// never runs. The bare tool, wrapped once, runs.
func TestWrapRefusesAWrappedTool(t *testing.T) {
	e := fullEnforcer(t)
	tool := &spy{}
	once := e.Wrap(tool)
	if !axgate.Wrapped(once) || axgate.Wrapped(tool) {
		t.Fatalf("Wrapped(Wrap(tool)) = %v, Wrapped(tool) = %v; want true, false", axgate.Wrapped(once), axgate.Wrapped(tool))
	}
	call := func() *middleware.Call {
		return middleware.NewCall("product_search", json.RawMessage(`{"query":"lamp"}`), principal)
	}
	_, err := e.Wrap(once).Invoke(context.Background(), call())
	if ae, ok := axerr.As(err); !ok || ae.Code != axerr.CodeInternal || !errors.Is(err, axgate.ErrWrapped) || tool.calls.Load() != 0 {
		t.Fatalf("a tool wrapped twice: %v, tool ran %d times; want AXGATE_INTERNAL caused by ErrWrapped, tool not run", err, tool.calls.Load())
	}
	if _, err := once.Invoke(context.Background(), call()); err != nil || tool.calls.Load() != 1 {
		t.Fatalf("the tool wrapped once: %v, ran %d times", err, tool.calls.Load())
	}
}
