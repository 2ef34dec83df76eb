package redisstore_test

// The enforcer-level tests of this module (the approval and idempotency
// quotas, two replicas sharing one Redis) were the core's until the Redis
// stores became a module of their own; these are the core's state_test.go
// helpers they use.

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
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
