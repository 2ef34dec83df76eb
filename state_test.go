package axgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// stateManifest declares one action per stateful gate.
const stateManifest = `{"version":"1.0.0","actions":[
 {"intent":"report.export","entity":"report","action_type":"read","description":"Export a report","rate_limit":"2/minute"},
 {"intent":"password.reset","entity":"password","action_type":"write","description":"Send a reset link","cooldown":"30s"},
 {"intent":"sms.send","entity":"sms","action_type":"write","description":"Send an SMS","rate_limit":"3/hour","cooldown":"10s"},
 {"intent":"order.place","entity":"order","action_type":"write","description":"Place an order","idempotent":false,
  "required_parameters":[{"name":"sku","type":"string","description":"Item"},{"name":"qty","type":"integer","description":"How many"}]},
 {"intent":"cart.view","entity":"cart","action_type":"read","description":"View the cart","idempotent":true},
 {"intent":"note.add","entity":"note","action_type":"write","description":"Add a note"}
]}`

func stateEnforcer(t testing.TB, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(stateManifest))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// counterTool counts its invocations and answers with the count, so that a
// replayed result can be told from a new one.
type counterTool struct{ n atomic.Int32 }

func (c *counterTool) Invoke(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	n := c.n.Add(1)
	return middleware.Result{Value: map[string]any{"invocation": n, "tool": call.Tool}}, nil
}

// stateCall describes one call of a test sequence.
type stateCall struct {
	tool string
	args string
	who  middleware.Principal
	key  string
}

var (
	alice    = middleware.Principal{ID: "alice", Tenant: "acme"}
	bob      = middleware.Principal{ID: "bob", Tenant: "acme"}
	aliceElf = middleware.Principal{ID: "alice", Tenant: "elf"}
)

func (sc stateCall) call() *middleware.Call {
	c := middleware.NewCall(sc.tool, json.RawMessage(sc.args), sc.who)
	c.Credentials.IdempotencyKey = sc.key
	return c
}

// envelopeDetails renders err as a caller sees it and returns its details,
// numbers as float64.
func envelopeDetails(t *testing.T, err error) (axerr.Code, int, map[string]any) {
	t.Helper()
	ae, ok := axerr.As(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *errors.Error", err, err)
	}
	raw, jerr := json.Marshal(ae)
	if jerr != nil {
		t.Fatal(jerr)
	}
	var env struct {
		Error struct {
			Code    axerr.Code     `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if jerr := json.Unmarshal(raw, &env); jerr != nil {
		t.Fatal(jerr)
	}
	return env.Error.Code, ae.HTTPStatus(), env.Error.Details
}

// TestStateGates is the table of the rate-limit, cooldown and idempotency
// gates through Enforcer.Wrap: each case makes its calls in order and checks
// the last one, and how many times the tool ran in all.
func TestStateGates(t *testing.T) {
	order := func(args string, key string, who middleware.Principal) stateCall {
		return stateCall{tool: "order_place", args: args, who: who, key: key}
	}
	const o1 = `{"sku":"A-1","qty":1}`
	for _, tc := range []struct {
		name  string
		opts  []axgate.Option
		calls []stateCall
		// runs is how many times the tool ran over all the calls.
		runs int
		// code is the last call's refusal, "" when it is allowed.
		code    axerr.Code
		status  int
		details map[string]any
		// replayed, warnings: the last call's facts when it is allowed.
		replayed bool
		warnings int
	}{
		{
			name:  "rate limit allows up to N",
			calls: []stateCall{{tool: "report_export", who: alice}, {tool: "report_export", who: alice}},
			runs:  2,
		},
		{
			name:  "rate limit refuses N+1",
			calls: []stateCall{{tool: "report_export", who: alice}, {tool: "report_export", who: alice}, {tool: "report_export", who: alice}},
			runs:  2, code: axerr.CodeRateLimited, status: 429,
			details: map[string]any{"gate": "rate_limit", "reason": "rate_limit", "rate_limit": "2/minute", "retry_after": 30.0, "retryable": true, "intent": "report.export"},
		},
		{
			name: "rate limit counts per principal",
			calls: []stateCall{{tool: "report_export", who: alice}, {tool: "report_export", who: alice},
				{tool: "report_export", who: bob}},
			runs: 3,
		},
		{
			name: "rate limit counts per tenant",
			calls: []stateCall{{tool: "report_export", who: alice}, {tool: "report_export", who: alice},
				{tool: "report_export", who: aliceElf}},
			runs: 3,
		},
		{
			name:  "cooldown refuses the second call",
			calls: []stateCall{{tool: "password_reset", who: alice}, {tool: "password_reset", who: alice}},
			runs:  1, code: axerr.CodeRateLimited, status: 429,
			details: map[string]any{"gate": "rate_limit", "reason": "cooldown", "cooldown_seconds": 30.0, "retry_after": 30.0},
		},
		{
			name:  "cooldown is per principal",
			calls: []stateCall{{tool: "password_reset", who: alice}, {tool: "password_reset", who: bob}},
			runs:  2,
		},
		{
			name:  "cooldown and rate limit together: the cooldown refuses",
			calls: []stateCall{{tool: "sms_send", who: alice}, {tool: "sms_send", who: alice}},
			runs:  1, code: axerr.CodeRateLimited, status: 429,
			details: map[string]any{"reason": "cooldown", "cooldown_seconds": 10.0, "retry_after": 10.0},
		},
		{
			name:  "idempotency key: first call runs",
			calls: []stateCall{order(o1, "k-1", alice)},
			runs:  1,
		},
		{
			name:  "idempotency key: same arguments, in any spelling, replay the stored result",
			calls: []stateCall{order(o1, "k-1", alice), order(` { "qty" : 1.0, "sku" : "A-1" } `, "k-1", alice)},
			runs:  1, replayed: true,
		},
		{
			name:  "idempotency key: other arguments are refused",
			calls: []stateCall{order(o1, "k-1", alice), order(`{"sku":"A-1","qty":2}`, "k-1", alice)},
			runs:  1, code: axerr.CodeIdempotencyKeyReused, status: 422,
			details: map[string]any{"gate": "idempotency", "idempotency_key": "k-1", "retryable": false, "intent": "order.place"},
		},
		{
			name:  "idempotency key: scoped to the principal",
			calls: []stateCall{order(o1, "k-1", alice), order(o1, "k-1", bob)},
			runs:  2,
		},
		{
			name:  "idempotency key: scoped to the tenant",
			calls: []stateCall{order(o1, "k-1", alice), order(o1, "k-1", aliceElf)},
			runs:  2,
		},
		{
			name:  "idempotency key: another key runs again (with a duplicate warning only without a key)",
			calls: []stateCall{order(o1, "k-1", alice), order(o1, "k-2", alice)},
			runs:  2,
		},
		{
			name:  "idempotency key on an idempotent action is ignored",
			calls: []stateCall{{tool: "cart_view", who: alice, key: "k"}, {tool: "cart_view", who: alice, key: "k"}},
			runs:  2,
		},
		{
			name:  "idempotency key on an action that does not say is ignored",
			calls: []stateCall{{tool: "note_add", who: alice, key: "k"}, {tool: "note_add", who: alice, key: "k"}},
			runs:  2,
		},
		{
			name:  "no key: a repeat is a duplicate, warned by default",
			calls: []stateCall{order(o1, "", alice), order(o1, "", alice)},
			runs:  2, warnings: 1,
		},
		{
			name:  "no key: other arguments are no duplicate",
			calls: []stateCall{order(o1, "", alice), order(`{"sku":"A-1","qty":2}`, "", alice)},
			runs:  2,
		},
		{
			name:  "no key: another principal's call is no duplicate",
			calls: []stateCall{order(o1, "", alice), order(o1, "", bob)},
			runs:  2,
		},
		{
			name:  "no key: duplicates refused on option",
			opts:  []axgate.Option{axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse, DuplicateWindow: time.Minute})},
			calls: []stateCall{order(o1, "", alice), order(o1, "", alice)},
			runs:  1, code: axerr.CodeDuplicateCall, status: 409,
			details: map[string]any{"gate": "idempotency", "window_seconds": 60.0, "retryable": false,
				"args_sha256": mustDigest(t, o1)},
		},
		{
			name:  "no key: duplicates ignored on option",
			opts:  []axgate.Option{axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateIgnore})},
			calls: []stateCall{order(o1, "", alice), order(o1, "", alice)},
			runs:  2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := stateEnforcer(t, tc.opts...)
			tool := &counterTool{}
			inv := e.Wrap(tool)
			var (
				call *middleware.Call
				res  middleware.Result
				err  error
			)
			for i, sc := range tc.calls {
				call = sc.call()
				res, err = inv.Invoke(context.Background(), call)
				if i < len(tc.calls)-1 && err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			if got := int(tool.n.Load()); got != tc.runs {
				t.Errorf("the tool ran %d times; want %d", got, tc.runs)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("last call refused: %v", err)
				}
				if call.Facts.Replayed != tc.replayed {
					t.Errorf("Facts.Replayed = %v; want %v", call.Facts.Replayed, tc.replayed)
				}
				if len(call.Facts.Warnings) != tc.warnings {
					t.Errorf("Facts.Warnings = %q; want %d", call.Facts.Warnings, tc.warnings)
				}
				if tc.replayed {
					raw, ok := res.Value.(json.RawMessage)
					if !ok || string(raw) != `{"invocation":1,"tool":"order_place"}` {
						t.Errorf("replayed value %#v; want json.RawMessage of the first result", res.Value)
					}
				}
				return
			}
			code, status, details := envelopeDetails(t, err)
			if code != tc.code || status != tc.status {
				t.Fatalf("refused with %s (%d); want %s (%d): %v", code, status, tc.code, tc.status, err)
			}
			for k, want := range tc.details {
				if got := details[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("details[%q] = %#v; want %#v (details %v)", k, got, want, details)
				}
			}
		})
	}
}

func mustDigest(t *testing.T, args string) string {
	t.Helper()
	d, err := middleware.NewCall("x", json.RawMessage(args), alice).ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStateGatesNeverInvokeTheTool: whatever these gates refuse, the tool
// does not run, and Check (which never runs it) agrees with the call.
func TestStateGatesNeverInvokeTheTool(t *testing.T) {
	e := stateEnforcer(t, axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse}))
	var ran atomic.Bool
	inv := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran.Store(true)
		return middleware.Result{Value: "done"}, nil
	}))
	ctx := context.Background()
	first := []stateCall{
		{tool: "report_export", who: alice}, {tool: "report_export", who: alice},
		{tool: "password_reset", who: alice},
		{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"},
		{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice},
	}
	for _, sc := range first {
		if _, err := inv.Invoke(ctx, sc.call()); err != nil {
			t.Fatalf("%s: %v", sc.tool, err)
		}
	}
	for _, sc := range []stateCall{
		{tool: "report_export", who: alice},
		{tool: "password_reset", who: alice},
		{tool: "order_place", args: `{"sku":"A","qty":2}`, who: alice, key: "k"},
		{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice},
	} {
		ran.Store(false)
		_, err := inv.Invoke(ctx, sc.call())
		if err == nil {
			t.Fatalf("%s: allowed; want refused", sc.tool)
		}
		if ran.Load() {
			t.Fatalf("%s: the tool ran although the call was refused (%v)", sc.tool, err)
		}
	}
	// A replay answers without the tool too.
	ran.Store(false)
	if _, err := inv.Invoke(ctx, first[3].call()); err != nil || ran.Load() {
		t.Fatalf("replay: err %v, tool ran %v; want the stored result without running", err, ran.Load())
	}
}

// TestCheckDoesNotChargeOrRecord: Enforcer.Check looks at the rate limit and
// refuses when it would, but charges nothing and records no idempotency key
// or duplicate.
func TestCheckDoesNotChargeOrRecord(t *testing.T) {
	e := stateEnforcer(t, axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse}))
	tool := &counterTool{}
	inv := e.Wrap(tool)
	ctx := context.Background()
	for range 5 {
		for _, sc := range []stateCall{
			{tool: "report_export", who: alice},
			{tool: "password_reset", who: alice},
			{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"},
			{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice},
		} {
			if err := e.Check(ctx, sc.call()); err != nil {
				t.Fatalf("Check %s: %v", sc.tool, err)
			}
		}
	}
	for _, sc := range []stateCall{
		{tool: "report_export", who: alice}, {tool: "report_export", who: alice},
		{tool: "password_reset", who: alice},
		{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"},
		{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice},
	} {
		call := sc.call()
		if _, err := inv.Invoke(ctx, call); err != nil || call.Facts.Replayed {
			t.Fatalf("%s after Checks: err %v, replayed %v; want a fresh run", sc.tool, err, call.Facts.Replayed)
		}
	}
	err := e.Check(ctx, stateCall{tool: "report_export", who: alice}.call())
	if code, _, d := envelopeDetails(t, err); code != axerr.CodeRateLimited || d["retry_after"] != 30.0 {
		t.Fatalf("Check over the limit: %v; want AXAG_RATE_LIMITED with retry_after 30", err)
	}
}

// refuseUnconfirmed stands for the confirmation gate: a stage after the rate
// limit that refuses calls without a confirmation.
func refuseUnconfirmed(std []middleware.Stage) []middleware.Stage {
	return append(std, middleware.Stage{Name: "confirm", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if call.Credentials.Confirmation == "" {
			return middleware.Result{}, axerr.New(axerr.CodeConfirmationMissing, "confirm first")
		}
		return next.Invoke(ctx, call)
	}})
}

// TestLaterRefusalDoesNotCharge: a call refused by a later gate (here a
// stand-in for the confirmation gate) does not use up the rate limit or the
// cooldown: they are charged right before the tool runs.
func TestLaterRefusalDoesNotCharge(t *testing.T) {
	e := stateEnforcer(t, axgate.WithPreExecution(refuseUnconfirmed))
	tool := &counterTool{}
	inv := e.Wrap(tool)
	ctx := context.Background()
	for _, name := range []string{"report_export", "password_reset"} {
		for range 5 {
			_, err := inv.Invoke(ctx, stateCall{tool: name, who: alice}.call())
			if !errors.Is(err, axerr.CodeConfirmationMissing) {
				t.Fatalf("%s unconfirmed: %v; want AXAG_CONFIRMATION_MISSING", name, err)
			}
		}
		call := stateCall{tool: name, who: alice}.call()
		call.Credentials.Confirmation = "yes"
		if _, err := inv.Invoke(ctx, call); err != nil {
			t.Fatalf("%s confirmed after 5 refusals: %v; want allowed", name, err)
		}
	}
}

// TestCallRefusedBeforeTheToolReleasesTheKey: a call refused after the
// idempotency gate but before its tool ran (a commit that fails, as a token
// spent meanwhile would) releases its key, and a retry with it runs; without
// a key, it is no original for a duplicate. Once the tool has run — even
// failing or panicking — the key is kept: a retry gets the first outcome, and
// a repeat without a key is a duplicate.
func TestCallRefusedBeforeTheToolReleasesTheKey(t *testing.T) {
	var failCommit atomic.Bool
	failingCommit := func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "spend", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			call.OnCommit(func(context.Context) error {
				if failCommit.Load() {
					return axerr.New(axerr.CodeConfirmationMissing, "token already used")
				}
				return nil
			})
			return next.Invoke(ctx, call)
		}})
	}
	e := stateEnforcer(t, axgate.WithPreExecution(failingCommit), axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse}))
	ctx := context.Background()

	var mode atomic.Value // "fail", "panic" or "ok"
	var runs atomic.Int32
	inv := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		runs.Add(1)
		switch mode.Load() {
		case "fail":
			return middleware.Result{}, errors.New("payment provider down")
		case "panic":
			panic("tool bug")
		}
		return middleware.Result{Value: "placed"}, nil
	}))
	invoke := func(sc stateCall) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		_, err = inv.Invoke(ctx, sc.call())
		return err
	}

	for _, key := range []string{"k-1", ""} {
		t.Run("key="+key, func(t *testing.T) {
			sc := stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: key}
			runs.Store(0)
			mode.Store("ok")
			failCommit.Store(true)
			for range 2 {
				if err := invoke(sc); !errors.Is(err, axerr.CodeConfirmationMissing) {
					t.Fatalf("failing commit: %v; want the commit's refusal", err)
				}
			}
			failCommit.Store(false)
			if err := invoke(sc); err != nil {
				t.Fatalf("retry after the commit failures: %v; want it to run", err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times; want once, after the commit failures", n)
			}
		})
	}

	for _, tc := range []struct {
		mode string
		// first is the first call's answer; retry, a retry's.
		first, retry string
	}{
		{"fail", string(axerr.CodeToolFailed), string(axerr.CodeToolFailed)},
		{"panic", "panic: tool bug", string(axerr.CodeInternal)},
	} {
		for _, key := range []string{"k-" + tc.mode, ""} {
			t.Run(tc.mode+"/key="+key, func(t *testing.T) {
				sc := stateCall{tool: "order_place", args: `{"sku":"B","qty":1}`, who: alice, key: key}
				if key == "" {
					sc.args = `{"sku":"` + tc.mode + `","qty":1}`
				}
				runs.Store(0)
				mode.Store(tc.mode)
				err := invoke(sc)
				if err == nil || (err.Error() != tc.first && !errors.Is(err, axerr.Code(tc.first))) {
					t.Fatalf("first call: %v; want %s", err, tc.first)
				}
				mode.Store("ok")
				want := axerr.Code(tc.retry)
				if key == "" {
					want = axerr.CodeDuplicateCall
				}
				if err := invoke(sc); !errors.Is(err, want) {
					t.Fatalf("retry: %v; want %s without running the tool again", err, want)
				}
				if n := runs.Load(); n != 1 {
					t.Fatalf("the tool ran %d times; want 1", n)
				}
			})
		}
	}
}

// blockingTool runs until released, to hold a call in flight.
type blockingTool struct {
	entered chan struct{}
	release chan struct{}
	runs    atomic.Int32
}

func (b *blockingTool) Invoke(ctx context.Context, _ *middleware.Call) (middleware.Result, error) {
	b.runs.Add(1)
	b.entered <- struct{}{}
	<-b.release
	return middleware.Result{Value: map[string]any{"order_id": "o-1"}}, nil
}

func TestDuplicateInFlight(t *testing.T) {
	e := stateEnforcer(t)
	tool := &blockingTool{entered: make(chan struct{}, 1), release: make(chan struct{})}
	inv := e.Wrap(tool)
	ctx := context.Background()
	sc := stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k-1"}

	done := make(chan error)
	go func() {
		_, err := inv.Invoke(ctx, sc.call())
		done <- err
	}()
	<-tool.entered

	_, err := inv.Invoke(ctx, sc.call())
	code, status, d := envelopeDetails(t, err)
	if code != axerr.CodeDuplicateInFlight || status != 409 || d["retry_after"] != 1.0 || d["idempotency_key"] != "k-1" || d["gate"] != "idempotency" {
		t.Fatalf("retry while in flight: %v %v; want AXGATE_DUPLICATE_IN_FLIGHT (409) with retry_after 1", err, d)
	}
	// Other arguments with the key are refused as a reuse even in flight.
	other := sc
	other.args = `{"sku":"B","qty":1}`
	if _, err := inv.Invoke(ctx, other.call()); !errors.Is(err, axerr.CodeIdempotencyKeyReused) {
		t.Fatalf("other arguments while in flight: %v; want AXGATE_IDEMPOTENCY_KEY_REUSED", err)
	}

	close(tool.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	call := sc.call()
	res, err := inv.Invoke(ctx, call)
	if err != nil || !call.Facts.Replayed || string(res.Value.(json.RawMessage)) != `{"order_id":"o-1"}` {
		t.Fatalf("retry after it finished: %v, %v, replayed %v; want the stored result", res.Value, err, call.Facts.Replayed)
	}
	if n := tool.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
}

// TestRateLimitExactUnderConcurrency: 8 goroutines call one key 100 times
// each through the whole chain; exactly the limit runs.
func TestRateLimitExactUnderConcurrency(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version":"1.0.0","actions":[{"intent":"report.export","entity":"report","action_type":"read","description":"Export","rate_limit":"10/hour"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	tool := &counterTool{}
	inv := e.Wrap(tool)
	var limited atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, err := inv.Invoke(context.Background(), stateCall{tool: "report_export", who: alice}.call())
				switch {
				case err == nil:
				case errors.Is(err, axerr.CodeRateLimited):
					limited.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if runs, refused := tool.n.Load(), limited.Load(); runs != 10 || refused != 790 {
		t.Fatalf("%d ran, %d rate limited of 800; want exactly 10 and 790", runs, refused)
	}
}

// TestIdempotencyKeyUnderConcurrency: 8 goroutines send the same keyed call;
// the tool runs once, and every other call gets its result or is told the
// first is in flight.
func TestIdempotencyKeyUnderConcurrency(t *testing.T) {
	e := stateEnforcer(t)
	tool := &counterTool{}
	inv := e.Wrap(tool)
	var ok, inFlight atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_, err := inv.Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"}.call())
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, axerr.CodeDuplicateInFlight):
					inFlight.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := tool.n.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
	if ok.Load()+inFlight.Load() != 400 {
		t.Fatalf("%d answered, %d in flight; want 400 in all", ok.Load(), inFlight.Load())
	}
}

// failingLimiter and failingStore stand for a store that is down.
type failingLimiter struct{}

func (failingLimiter) AllowN(context.Context, []gates.LimitKey, int) (gates.LimitDecision, error) {
	return gates.LimitDecision{}, errors.New("dial tcp 10.0.0.7:6379: connection refused")
}

type failingStore struct{ failOn string }

func (f failingStore) Begin(context.Context, gates.IdempotencyOwner, string, string, time.Duration) (*gates.IdempotencyRecord, string, error) {
	if f.failOn == "begin" {
		return nil, "", errors.New("dial tcp 10.0.0.7:6379: connection refused")
	}
	return nil, "claim", nil
}

func (f failingStore) Complete(context.Context, gates.IdempotencyOwner, string, string, gates.IdempotencyOutcome, time.Duration) error {
	return errors.New("dial tcp 10.0.0.7:6379: connection refused")
}

func (f failingStore) Release(context.Context, gates.IdempotencyOwner, string, string) error {
	return nil
}

// TestStoreFailureFailsClosed: a store that fails makes the gate refuse with
// 503 AXGATE_STORE_UNAVAILABLE, naming no internals, and the tool does not run.
func TestStoreFailureFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  axgate.Option
		sc   stateCall
		gate string
	}{
		{"limiter", axgate.WithLimiter(failingLimiter{}), stateCall{tool: "report_export", who: alice}, "rate_limit"},
		{"idempotency store, keyed", axgate.WithIdempotency(gates.IdempotencyOptions{Store: failingStore{failOn: "begin"}}),
			stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"}, "idempotency"},
		{"idempotency store, duplicate check", axgate.WithIdempotency(gates.IdempotencyOptions{Store: failingStore{failOn: "begin"}}),
			stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice}, "idempotency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := &counterTool{}
			_, err := stateEnforcer(t, tc.opt).Wrap(tool).Invoke(context.Background(), tc.sc.call())
			code, status, d := envelopeDetails(t, err)
			if code != axerr.CodeStoreUnavailable || status != 503 || d["gate"] != tc.gate || d["retry_after"] != 1.0 {
				t.Fatalf("%v %v; want AXGATE_STORE_UNAVAILABLE (503) from %s", err, d, tc.gate)
			}
			raw, _ := json.Marshal(err)
			if s := string(raw); strings.Contains(s, "10.0.0.7") || strings.Contains(s, "connection refused") {
				t.Fatalf("the refusal shows the store's error: %s", s)
			}
			if n := tool.n.Load(); n != 0 {
				t.Fatalf("the tool ran %d times", n)
			}
		})
	}
	// The result cannot be stored after the tool ran: the caller gets the
	// result (it happened), with a warning for the audit log.
	call := stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"}.call()
	res, err := stateEnforcer(t, axgate.WithIdempotency(gates.IdempotencyOptions{Store: failingStore{}})).Wrap(&counterTool{}).Invoke(context.Background(), call)
	if err != nil || res.Value == nil || len(call.Facts.Warnings) != 1 {
		t.Fatalf("store failing after the tool ran: %v, %v, warnings %q; want the result and a warning", res, err, call.Facts.Warnings)
	}
}

func TestStateOptionsRefuseBadValues(t *testing.T) {
	m, err := manifest.Parse([]byte(stateManifest))
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]axgate.Option{
		"negative window":           axgate.WithIdempotency(gates.IdempotencyOptions{Window: -time.Hour}),
		"negative lease":            axgate.WithIdempotency(gates.IdempotencyOptions{Lease: -time.Minute}),
		"negative duplicate window": axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateWarn, DuplicateWindow: -time.Second}),
		"unknown duplicate policy":  axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicatePolicy(7), DuplicateWindow: time.Minute}),
		"negative quota":            axgate.WithIdempotency(gates.IdempotencyOptions{Quota: -1}),
	} {
		if _, err := axgate.New(m, opt); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestIdempotencyStoreOptionIsUsed: the enforcer keeps its records in the
// store it is given, one per keyed call (a keyed call is not also checked for
// duplicates), whether the WithIdempotency that sets other settings comes
// before or after the one that sets the Store.
func TestIdempotencyStoreOptionIsUsed(t *testing.T) {
	settings := axgate.WithIdempotency(gates.IdempotencyOptions{Window: time.Hour, Lease: time.Minute})
	for _, order := range []string{"store first", "settings first"} {
		store := gate.NewMemoryIdempotencyStore(0)
		opts := []axgate.Option{axgate.WithIdempotency(gates.IdempotencyOptions{Store: store}), settings}
		if order == "settings first" {
			opts[0], opts[1] = opts[1], opts[0]
		}
		e := stateEnforcer(t, opts...)
		if _, err := e.Wrap(&counterTool{}).Invoke(context.Background(), stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice, key: "k"}.call()); err != nil {
			t.Fatal(err)
		}
		if n := store.Len(); n != 1 {
			t.Fatalf("%s: the store holds %d records; want 1", order, n)
		}
	}
}

// TestIdempotencyLaterOptionKeepsEarlierSettings: a later WithIdempotency
// sets only its non-zero fields, so one that gives just the Store (what
// WithIdempotencyStore was) keeps the duplicate policy set before it.
func TestIdempotencyLaterOptionKeepsEarlierSettings(t *testing.T) {
	e := stateEnforcer(t,
		axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse}),
		axgate.WithIdempotency(gates.IdempotencyOptions{Store: memstore.NewIdempotencyStore(0)}))
	inv := e.Wrap(&counterTool{})
	c := stateCall{tool: "order_place", args: `{"sku":"A","qty":1}`, who: alice}
	if _, err := inv.Invoke(context.Background(), c.call()); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Invoke(context.Background(), c.call()); !axerr.Is(err, axerr.CodeDuplicateCall) {
		t.Fatalf("repeat without a key = %v; want %s: the later option dropped the duplicate policy", err, axerr.CodeDuplicateCall)
	}
}

// Example_rateLimit: an action declaring rate_limit "2/minute" refuses the
// third call with AXAG_RATE_LIMITED and a retry_after.
func Example_rateLimit() {
	m, _ := manifest.Parse([]byte(`{"version":"1.0.0","actions":[
	  {"intent":"report.export","entity":"report","action_type":"read","description":"Export a report","rate_limit":"2/minute"}]}`))
	enf, _ := axgate.New(m) // counts in memory; axgate.WithLimiter for a shared store
	export := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "report.csv"}, nil
	}))
	who := middleware.Principal{ID: "user-1", Tenant: "acme"}
	for range 3 {
		_, err := export.Invoke(context.Background(), middleware.NewCall("report_export", nil, who))
		if e, ok := axerr.As(err); ok {
			fmt.Println(e.Code, e.HTTPStatus(), "retry after", e.RetryAfterSeconds(), "s")
			continue
		}
		fmt.Println("ok")
	}
	// Output:
	// ok
	// ok
	// AXAG_RATE_LIMITED 429 retry after 30 s
}

// Example_idempotencyKey: a retry with the same idempotency key and
// arguments gets the stored result; the tool runs once.
func Example_idempotencyKey() {
	m, _ := manifest.Parse([]byte(`{"version":"1.0.0","actions":[
	  {"intent":"order.place","entity":"order","action_type":"write","description":"Place an order","idempotent":false,
	   "required_parameters":[{"name":"sku","type":"string","description":"Item"}]}]}`))
	enf, _ := axgate.New(m)
	orders := 0
	place := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		orders++
		return middleware.Result{Value: map[string]any{"order_id": fmt.Sprint("o-", orders)}}, nil
	}))
	who := middleware.Principal{ID: "user-1", Tenant: "acme"}
	for _, args := range []string{`{"sku":"A-1"}`, `{ "sku": "A-1" }`, `{"sku":"B-2"}`} {
		call := middleware.NewCall("order_place", json.RawMessage(args), who)
		call.Credentials.IdempotencyKey = "8e03978e-40d5-43e8-bc93-6894a57f9324" // the Idempotency-Key header
		res, err := place.Invoke(context.Background(), call)
		if e, ok := axerr.As(err); ok {
			fmt.Println(e.Code, e.HTTPStatus())
			continue
		}
		out, _ := json.Marshal(res.Value)
		fmt.Println(string(out), "replayed:", call.Facts.Replayed)
	}
	fmt.Println("orders placed:", orders)
	// Output:
	// {"order_id":"o-1"} replayed: false
	// {"order_id":"o-1"} replayed: true
	// AXGATE_IDEMPOTENCY_KEY_REUSED 422
	// orders placed: 1
}

// ExampleWithIdempotency: without an idempotency key, the same
// non-idempotent call twice within the window is refused under
// gates.DuplicateRefuse (by default it runs, with a warning in
// call.Facts.Warnings).
func ExampleWithIdempotency() {
	m, _ := manifest.Parse([]byte(`{"version":"1.0.0","actions":[
	  {"intent":"email.send","entity":"email","action_type":"write","description":"Send an email","idempotent":false}]}`))
	enf, _ := axgate.New(m, axgate.WithIdempotency(gates.IdempotencyOptions{Duplicates: gates.DuplicateRefuse, DuplicateWindow: 30 * time.Second}))
	send := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "sent"}, nil
	}))
	who := middleware.Principal{ID: "user-1", Tenant: "acme"}
	for range 2 {
		_, err := send.Invoke(context.Background(), middleware.NewCall("email_send", json.RawMessage(`{"to":"a@example.com"}`), who))
		fmt.Println(err)
	}
	// Output:
	// <nil>
	// AXGATE_DUPLICATE_CALL: email.send was just called with the same arguments, and it is not idempotent
}

// lastUnitTaken lets every look pass and refuses every charge: the race for
// the last unit lost between the rate-limit stage and the commit.
type lastUnitTaken struct{}

func (lastUnitTaken) AllowN(_ context.Context, _ []gates.LimitKey, n int) (gates.LimitDecision, error) {
	if n == 0 {
		return gates.LimitDecision{Allowed: true, Remaining: 1}, nil
	}
	return gates.LimitDecision{RetryAfter: 1500 * time.Millisecond}, nil
}

// TestRateLimitLostAtCommit: a call that passes the look but loses the last
// unit at the commit is refused there, by the rate_limit gate, before the
// tokens of later gates are spent and before the tool runs.
func TestRateLimitLostAtCommit(t *testing.T) {
	var spent atomic.Bool
	spendToken := func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "confirm", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			call.OnCommit(func(context.Context) error { spent.Store(true); return nil })
			return next.Invoke(ctx, call)
		}})
	}
	tool := &counterTool{}
	e := stateEnforcer(t, axgate.WithLimiter(lastUnitTaken{}), axgate.WithPreExecution(spendToken))
	_, err := e.Wrap(tool).Invoke(context.Background(), stateCall{tool: "report_export", who: alice}.call())
	code, status, d := envelopeDetails(t, err)
	if code != axerr.CodeRateLimited || status != 429 || d["gate"] != "rate_limit" || d["retry_after"] != 2.0 {
		t.Fatalf("%v %v; want AXAG_RATE_LIMITED from rate_limit with retry_after 2", err, d)
	}
	if spent.Load() || tool.n.Load() != 0 {
		t.Fatalf("token spent %v, tool ran %d times; want neither", spent.Load(), tool.n.Load())
	}
}

// bothRefuse refuses every call: the cooldown would for 5s and the rate
// limit for 40s, so it names the rate limit.
type bothRefuse struct{ charged atomic.Int32 }

func (b *bothRefuse) AllowN(_ context.Context, keys []gates.LimitKey, n int) (gates.LimitDecision, error) {
	if n > 0 {
		b.charged.Add(1)
	}
	d := gates.LimitDecision{RetryAfter: 5 * time.Second}
	for i, k := range keys {
		if strings.HasPrefix(k.Key, "rate:") {
			d = gates.LimitDecision{RetryAfter: 40 * time.Second, RefusedBy: i}
		}
	}
	return d, nil
}

// TestRateLimitReportsTheLongerWait: when the cooldown and the rate limit
// both refuse, the refusal names the one that lasts longer, so that waiting
// retry_after once is enough; nothing is charged.
func TestRateLimitReportsTheLongerWait(t *testing.T) {
	l := &bothRefuse{}
	_, err := stateEnforcer(t, axgate.WithLimiter(l)).Wrap(&counterTool{}).Invoke(context.Background(), stateCall{tool: "sms_send", who: alice}.call())
	code, _, d := envelopeDetails(t, err)
	if code != axerr.CodeRateLimited || d["reason"] != "rate_limit" || d["rate_limit"] != "3/hour" || d["retry_after"] != 40.0 {
		t.Fatalf("%v %v; want the rate limit's refusal with retry_after 40", err, d)
	}
	if n := l.charged.Load(); n != 0 {
		t.Fatalf("charged %d times", n)
	}
}

// chargeManifest is a payment: not idempotent, with a postcondition.
const chargeManifest = `{"version":"1.0.0","actions":[
 {"intent":"payment.charge","entity":"payment","action_type":"write","description":"Charge a card","idempotent":false,
  "postconditions":["charge settled"],
  "required_parameters":[{"name":"amount","type":"integer","description":"Cents"}]}
]}`

// TestKeyedCallThatRanKeepsItsOutcome: once the tool has run, a failure —
// the tool's own, or a postcondition after it — is stored under the
// idempotency key like a result, and a retry with the key gets the same
// refusal without running the tool again: a payment is charged once per
// key. A call refused before the tool ran (a commit that fails) releases the
// key instead, and a retry runs.
func TestKeyedCallThatRanKeepsItsOutcome(t *testing.T) {
	m, err := manifest.Parse([]byte(chargeManifest))
	if err != nil {
		t.Fatal(err)
	}
	var settled atomic.Bool
	e, err := axgate.New(m, axgate.WithPostcondition("charge settled", func(context.Context, *middleware.Call, middleware.Result) error {
		if !settled.Load() {
			return errors.New("the charge is still pending")
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		tool    func() error
		settled bool
		code    axerr.Code
		details map[string]any
	}{
		{"tool error", func() error { return errors.New("card network timeout") }, true, axerr.CodeToolFailed, nil},
		{"tool refusal", func() error {
			return axerr.New(axerr.CodeToolFailed, "card declined").With("decline_code", "insufficient_funds")
		}, true, axerr.CodeToolFailed, map[string]any{"decline_code": "insufficient_funds"}},
		{"postcondition", func() error { return nil }, false, axerr.CodePostconditionFailed, map[string]any{"failed_postcondition": "charge settled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settled.Store(tc.settled)
			var runs atomic.Int32
			inv := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
				runs.Add(1)
				return middleware.Result{Value: map[string]any{"charge_id": "ch-1"}}, tc.tool()
			}))
			var firstMessage string
			for i := range 3 {
				call := stateCall{tool: "payment_charge", args: `{"amount":500}`, who: alice, key: "pay-" + tc.name}.call()
				_, err := inv.Invoke(context.Background(), call)
				code, _, d := envelopeDetails(t, err)
				if code != tc.code {
					t.Fatalf("call %d: %v; want %s", i+1, err, tc.code)
				}
				for k, want := range tc.details {
					if d[k] != want {
						t.Errorf("call %d: details[%q] = %#v; want %#v", i+1, k, d[k], want)
					}
				}
				ae, _ := axerr.As(err)
				if i == 0 {
					firstMessage = ae.Message
					continue
				}
				if !call.Facts.Replayed || d["replayed"] != true || d["idempotency_key"] != "pay-"+tc.name || ae.Message != firstMessage {
					t.Errorf("retry %d: %v, replayed %v, details %v; want the first refusal (%q), marked replayed", i, err, call.Facts.Replayed, d, firstMessage)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times under one idempotency key; want 1", n)
			}
		})
	}
}
