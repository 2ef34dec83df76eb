package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

type recorder struct{ events []string }

func (r *recorder) StageDone(_ context.Context, _ *middleware.Call, stage string, d time.Duration, err error) {
	outcome := "pass"
	if err != nil {
		outcome = "refuse"
	}
	if d < 0 {
		outcome = "negative-duration"
	}
	r.events = append(r.events, stage+":"+outcome)
}

func stage(name string, log *[]string, refuse error) middleware.Stage {
	return middleware.Stage{Name: name, Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		*log = append(*log, name)
		if refuse != nil {
			return middleware.Result{}, refuse
		}
		return next.Invoke(ctx, c)
	}}
}

func TestBuildOrderAndAttribution(t *testing.T) {
	var log []string
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		log = append(log, "tool")
		return middleware.Result{Value: "done"}, nil
	})
	rec := &recorder{}
	inv := middleware.Build(tool, rec, stage("a", &log, nil), stage("b", &log, nil))
	res, err := inv.Invoke(context.Background(), middleware.NewCall("t", nil, middleware.Principal{}))
	if err != nil || res.Value != "done" {
		t.Fatalf("Invoke = %v, %v", res, err)
	}
	if strings.Join(log, ",") != "a,b,tool" {
		t.Errorf("order = %v", log)
	}
	if strings.Join(rec.events, ",") != "a:pass,b:pass" {
		t.Errorf("observer = %v", rec.events)
	}

	log, rec.events = nil, nil
	refusal := axerr.New(axerr.CodeScopeViolation, "no")
	inv = middleware.Build(tool, rec, stage("a", &log, nil), stage("b", &log, refusal), stage("c", &log, nil))
	_, err = inv.Invoke(context.Background(), middleware.NewCall("t", nil, middleware.Principal{}))
	got, _ := axerr.As(err)
	if !errors.Is(err, axerr.CodeScopeViolation) || got == nil || got.Gate != "b" {
		t.Fatalf("err = %v; want the refusal of stage b", err)
	}
	if refusal.Gate != "" {
		t.Errorf("the stage's own error was annotated in place: gate %q", refusal.Gate)
	}
	if strings.Join(log, ",") != "a,b" {
		t.Errorf("stages after a refusal ran: %v", log)
	}
	if strings.Join(rec.events, ",") != "a:pass,b:refuse" {
		t.Errorf("observer = %v", rec.events)
	}
}

func TestBuildForLeavesOutStagesThatDoNotApply(t *testing.T) {
	read := &manifest.Action{Intent: "report.read", Type: manifest.Read}
	write := &manifest.Action{Intent: "report.delete", Type: manifest.Delete}
	var log []string
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		log = append(log, "tool")
		return middleware.Result{}, nil
	})
	writesOnly := stage("writes_only", &log, nil)
	writesOnly.Applies = func(a *manifest.Action) bool { return a.Type != manifest.Read }
	stages := []middleware.Stage{stage("always", &log, nil), writesOnly, stage("last", &log, nil)}
	for _, tc := range []struct {
		action *manifest.Action
		want   string
	}{
		{read, "always,last,tool"},
		{write, "always,writes_only,last,tool"},
		// Without an action nothing can be left out.
		{nil, "always,writes_only,last,tool"},
	} {
		log = nil
		rec := &recorder{}
		inv := middleware.BuildFor(tc.action, tool, rec, stages...)
		if _, err := inv.Invoke(context.Background(), &middleware.Call{Action: tc.action}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(log, ","); got != tc.want {
			t.Errorf("%v: ran %s; want %s", tc.action, got, tc.want)
		}
		if want := strings.ReplaceAll(strings.TrimSuffix(tc.want, ",tool"), ",", ":pass,") + ":pass"; strings.Join(rec.events, ",") != want {
			t.Errorf("%v: observer heard %v; want %s", tc.action, rec.events, want)
		}
	}
	if !writesOnly.AppliesTo(nil) || writesOnly.AppliesTo(read) || !stages[0].AppliesTo(read) {
		t.Error("AppliesTo disagrees with Applies")
	}
}

// A chain built for one action refuses a call that a stage turns into a call
// of another: the gates left out of that chain would have checked it.
func TestBuildForRefusesAChangedAction(t *testing.T) {
	read := &manifest.Action{Intent: "report.read", Type: manifest.Read}
	del := &manifest.Action{Intent: "report.delete", Type: manifest.Delete}
	switchTo := func(name string, a *manifest.Action, log *[]string) middleware.Stage {
		return middleware.Stage{Name: name, Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			*log = append(*log, name)
			c.Action = a
			return next.Invoke(ctx, c)
		}}
	}
	for _, tc := range []struct {
		name   string
		stages func(log *[]string) []middleware.Stage
		gate   string
		ran    string
	}{
		{"a stage in the middle", func(log *[]string) []middleware.Stage {
			return []middleware.Stage{switchTo("resolve", del, log), stage("after", log, nil)}
		}, "resolve", "resolve"},
		{"the last stage", func(log *[]string) []middleware.Stage {
			return []middleware.Stage{stage("first", log, nil), switchTo("resolve", del, log)}
		}, "resolve", "first,resolve"},
		{"resolving to the chain's own action", func(log *[]string) []middleware.Stage {
			return []middleware.Stage{switchTo("resolve", read, log), stage("after", log, nil)}
		}, "", "resolve,after,tool"},
		// Cleared after it was resolved: the stages left out would have
		// refused a call with no action; the tool must not run either.
		{"clearing it", func(log *[]string) []middleware.Stage {
			return []middleware.Stage{switchTo("resolve", read, log), switchTo("clear", nil, log), stage("after", log, nil)}
		}, "after", "resolve,clear,after"},
		// Never resolved at all.
		{"leaving it unresolved", func(log *[]string) []middleware.Stage {
			return []middleware.Stage{stage("only", log, nil)}
		}, "only", "only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
				log = append(log, "tool")
				return middleware.Result{}, nil
			})
			rec := &recorder{}
			// The call's action is not resolved yet, as when the chain is
			// chosen by tool name before the intent gate runs.
			_, err := middleware.BuildFor(read, tool, rec, tc.stages(&log)...).Invoke(context.Background(), &middleware.Call{Tool: "report_read"})
			if got := strings.Join(log, ","); got != tc.ran {
				t.Errorf("ran %s; want %s", got, tc.ran)
			}
			if tc.gate == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			ae, ok := axerr.As(err)
			if !ok || ae.Code != axerr.CodeInternal || ae.Gate != tc.gate {
				t.Fatalf("err = %v; want %s from %s", err, axerr.CodeInternal, tc.gate)
			}
			if last := rec.events[len(rec.events)-1]; last != tc.gate+":refuse" {
				t.Errorf("observer = %v; want the last %s:refuse", rec.events, tc.gate)
			}
		})
	}
}

func TestChainComposes(t *testing.T) {
	var log []string
	mk := func(name string) middleware.Stage {
		return middleware.Stage{Name: name, Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			log = append(log, name)
			return next.Invoke(ctx, c)
		}}
	}
	// A chain nested in a stage of another hands the call back to it.
	nested := middleware.Stage{Name: "1-2", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		return middleware.Build(next, nil, mk("1"), mk("2")).Invoke(ctx, c)
	}}
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		log = append(log, "tool")
		return middleware.Result{}, nil
	})
	inv := middleware.Build(tool, nil, nested, mk("3"))
	if _, err := inv.Invoke(context.Background(), &middleware.Call{}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(log, ",") != "1,2,3,tool" {
		t.Errorf("order = %v", log)
	}
}

func TestArgsDecoding(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		lim  middleware.Limits
		code axerr.Code
	}{
		{name: "object", raw: `{"a":1}`},
		{name: "empty means {}", raw: ``},
		{name: "null means {}", raw: `null`},
		{name: "array", raw: `[1]`, code: axerr.CodeInvalidArguments},
		{name: "string", raw: `"x"`, code: axerr.CodeInvalidArguments},
		{name: "not json", raw: `{a:1}`, code: axerr.CodeInvalidArguments},
		{name: "bad utf8", raw: "{\"a\":\"\xc3\x28\"}", code: axerr.CodeInvalidArguments},
		{name: "duplicate", raw: `{"a":1,"a":2}`, code: axerr.CodeInvalidArguments},
		{name: "too deep", raw: `{"a":[[[[[1]]]]]}`, lim: middleware.Limits{MaxDepth: 3}, code: axerr.CodeInvalidArguments},
		{name: "too large", raw: `{"a":"` + strings.Repeat("x", 100) + `"}`, lim: middleware.Limits{MaxBytes: 64}, code: axerr.CodePayloadTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := middleware.NewCall("t", json.RawMessage(tc.raw), middleware.Principal{})
			c.Limits = tc.lim
			args, err := c.Args()
			if tc.code == "" {
				if err != nil || args == nil {
					t.Fatalf("Args = %v, %v", args, err)
				}
				return
			}
			if !errors.Is(err, tc.code) {
				t.Fatalf("err = %v; want %s", err, tc.code)
			}
			// The second look returns the same answer without decoding again.
			if _, err2 := c.Args(); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("second Args = %v", err2)
			}
		})
	}
}

// TestArgsIJSON: the arguments are I-JSON, and each refusal says why with a
// reason, a path and a suggestion an agent can act on.
func TestArgsIJSON(t *testing.T) {
	cases := []struct {
		name   string
		raw    string
		lim    middleware.Limits
		code   axerr.Code
		reason axerr.Reason
		path   string
	}{
		{name: "big id", raw: `{"user_id":1234567890123456800}`, code: axerr.CodeInvalidType, reason: reasons.NumberNotInteroperable, path: "/user_id"},
		{name: "rounding decimal", raw: `{"a":{"b":[0.10000000000000001]}}`, code: axerr.CodeInvalidType, reason: reasons.NumberNotInteroperable, path: "/a/b/0"},
		{name: "exponent", raw: `{"n":1e20}`, code: axerr.CodeInvalidType, reason: reasons.NumberNotInteroperable, path: "/n"},
		{name: "case-folded keys", raw: `{"tenant_id":"acme","TENANT_ID":"globex"}`, code: axerr.CodeInvalidArguments, reason: reasons.AmbiguousKeys, path: "/TENANT_ID"},
		{name: "kelvin sign", raw: `{"filter":{"k":1,"\u212a":2}}`, code: axerr.CodeInvalidArguments, reason: reasons.AmbiguousKeys, path: "/filter/\u212a"},
		{name: "default member limit", raw: wideObject(middleware.DefaultMaxArgMembers + 1), code: axerr.CodeInvalidArguments, reason: reasons.TooManyMembers, path: ""},
		{name: "member limit", raw: `{"a":{"x":1,"y":2,"z":3}}`, lim: middleware.Limits{MaxMembers: 2}, code: axerr.CodeInvalidArguments, reason: reasons.TooManyMembers, path: "/a"},
		{name: "default item limit", raw: `{"ids":[` + strings.TrimSuffix(strings.Repeat("1,", middleware.DefaultMaxArgItems+1), ",") + `]}`, code: axerr.CodeInvalidArguments, reason: reasons.TooManyItems, path: "/ids"},
		{name: "item limit", raw: `{"a":[[1,2],[1,2,3]]}`, lim: middleware.Limits{MaxItems: 2}, code: axerr.CodeInvalidArguments, reason: reasons.TooManyItems, path: "/a/1"},
		{name: "lone high surrogate", raw: `{"text":"\ud800"}`, code: axerr.CodeInvalidArguments, reason: reasons.InvalidString, path: "/text"},
		{name: "lone low surrogate", raw: `{"notes":["ok","\udc00"]}`, code: axerr.CodeInvalidArguments, reason: reasons.InvalidString, path: "/notes/1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := middleware.NewCall("t", json.RawMessage(tc.raw), middleware.Principal{})
			c.Limits = tc.lim
			_, err := c.Args()
			ae, ok := axerr.As(err)
			if !ok || ae.Code != tc.code || ae.HTTPStatus() != 400 || ae.Details["reason"] != string(tc.reason) || ae.Suggestion == "" {
				t.Fatalf("err = %#v; want %s with reason %s", err, tc.code, tc.reason)
			}
			want, _ := strconv.Unquote(`"` + tc.path + `"`)
			if len(ae.Violations) != 1 || ae.Violations[0].Path != want {
				t.Fatalf("violations = %+v; want one at %q", ae.Violations, want)
			}
		})
	}
	ok := middleware.NewCall("t", json.RawMessage(wideObject(middleware.DefaultMaxArgMembers)+``), middleware.Principal{})
	if _, err := ok.Args(); err != nil {
		t.Fatalf("an object of exactly the member limit: %v", err)
	}
	long := middleware.NewCall("t", json.RawMessage(`{"ids":[`+strings.TrimSuffix(strings.Repeat("1,", middleware.DefaultMaxArgItems), ",")+`],"s":"\ud83d\ude00"}`), middleware.Principal{})
	if _, err := long.Args(); err != nil {
		t.Fatalf("an array of exactly the item limit and a surrogate pair: %v", err)
	}
}

func wideObject(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.String()
}

func TestArgsSHA256IsCanonical(t *testing.T) {
	a := middleware.NewCall("t", json.RawMessage(`{"b": 1.0, "a": "x"}`), middleware.Principal{})
	b := middleware.NewCall("t", json.RawMessage(`{"a":"x","b":1}`), middleware.Principal{})
	c := middleware.NewCall("t", json.RawMessage(`{"a":"x","b":2}`), middleware.Principal{})
	ha, err := a.ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := b.ArgsSHA256()
	hc, _ := c.ArgsSHA256()
	if ha != hb {
		t.Errorf("key order or number spelling changed the digest: %s vs %s", ha, hb)
	}
	if ha == hc {
		t.Error("different arguments gave the same digest")
	}
	if len(ha) != 43 || strings.ContainsAny(ha, "+/=") {
		t.Errorf("digest %q is not unpadded base64url of 32 bytes", ha)
	}
	empty := middleware.NewCall("t", nil, middleware.Principal{})
	he, _ := empty.ArgsSHA256()
	braces := middleware.NewCall("t", json.RawMessage(`{}`), middleware.Principal{})
	if hb2, _ := braces.ArgsSHA256(); he != hb2 {
		t.Error("no arguments and {} hash differently")
	}
}

// CanonicalArguments are the bytes ArgsSHA256 digests: what an adapter hands
// the tool is what a token binds.
func TestCanonicalArgumentsAreWhatIsDigested(t *testing.T) {
	c := middleware.NewCall("t", json.RawMessage(`{ "b": 1.0E2, "a": "\u0078" }`), middleware.Principal{})
	canon, err := c.CanonicalArguments()
	if err != nil || string(canon) != `{"a":"x","b":100}` {
		t.Fatalf("CanonicalArguments = %s, %v", canon, err)
	}
	if d, _ := c.ArgsSHA256(); d != middleware.DigestCanonical(canon) {
		t.Fatalf("ArgsSHA256 %s is not the digest of the canonical bytes", d)
	}
	if empty, _ := middleware.NewCall("t", nil, middleware.Principal{}).CanonicalArguments(); string(empty) != "{}" {
		t.Fatalf("no arguments: %s", empty)
	}
	if _, err := middleware.NewCall("t", json.RawMessage(`[1]`), middleware.Principal{}).CanonicalArguments(); err == nil {
		t.Fatal("an array was canonicalized as arguments")
	}
}

func TestCommitsRunOnce(t *testing.T) {
	c := &middleware.Call{}
	n := 0
	c.OnCommit(func(context.Context) error { n++; return nil })
	if err := c.RunCommits(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunCommits = %v, n = %d", err, n)
	}
	if err := c.RunCommits(context.Background()); err != nil || n != 1 {
		t.Fatalf("commits ran twice: n = %d", n)
	}
}

func TestBlankAndNullArgumentsHashAsEmpty(t *testing.T) {
	want, _ := middleware.NewCall("t", json.RawMessage(`{}`), middleware.Principal{}).ArgsSHA256()
	for _, raw := range []string{"", "  ", "null", " null\n"} {
		got, err := middleware.NewCall("t", json.RawMessage(raw), middleware.Principal{}).ArgsSHA256()
		if err != nil || got != want {
			t.Errorf("%q hashes to %s, %v; want the hash of {}", raw, got, err)
		}
	}
}

// untimedRecorder is an Observer that does not want the stages' times.
type untimedRecorder struct {
	recorder
	durations []time.Duration
}

func (r *untimedRecorder) TimesStages() bool { return false }

func (r *untimedRecorder) StageDone(ctx context.Context, call *middleware.Call, stage string, d time.Duration, err error) {
	r.durations = append(r.durations, d)
	r.recorder.StageDone(ctx, call, stage, d, err)
}

// An Observer that does not time the stages (StageTimer) still hears every
// stage's outcome, in order, a refusal included, with d = 0; and a timed
// observer of an outer chain keeps its stages' times.
func TestBuildUntimedObserver(t *testing.T) {
	var log []string
	rec := &untimedRecorder{}
	refusal := axerr.New(axerr.CodeMissingParam, "missing")
	chain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}), rec, stage("a", &log, nil), stage("b", &log, nil), stage("", &log, nil))
	if _, err := chain.Invoke(context.Background(), middleware.NewCall("t", nil, middleware.Principal{})); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.events, " "); got != "a:pass b:pass :pass" {
		t.Errorf("events = %q", got)
	}
	refusing := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}), rec, stage("a", &log, nil), stage("b", &log, refusal))
	rec.events = nil
	if _, err := refusing.Invoke(context.Background(), middleware.NewCall("t", nil, middleware.Principal{})); err == nil {
		t.Fatal("allowed")
	}
	if got := strings.Join(rec.events, " "); got != "a:pass b:refuse" {
		t.Errorf("events = %q", got)
	}
	for i, d := range rec.durations {
		if d != 0 {
			t.Errorf("duration %d = %v; want 0 from an untimed chain", i, d)
		}
	}

	// A timed outer chain whose stage runs an untimed chain inside it.
	outer := &recorder{}
	inner := &untimedRecorder{}
	innerChain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}), inner, stage("in", &log, nil))
	wrap := middleware.Stage{Name: "wrap", Interceptor: func(ctx context.Context, c *middleware.Call, _ middleware.Invoker) (middleware.Result, error) {
		return innerChain.Invoke(ctx, c)
	}}
	outerChain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ok"}, nil
	}), outer, stage("first", &log, nil), wrap)
	if _, err := outerChain.Invoke(context.Background(), middleware.NewCall("t", nil, middleware.Principal{})); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(outer.events, inner.events...), " "); strings.Contains(got, "negative") {
		t.Errorf("events = %q", got)
	}
}
