package gates_test

import (
	"context"
	"sync"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// TestApprovalRunVoidsTokensMintedOnASkewedReplica: the run of a call voids
// the approval tokens minted for its request before it, by jti, whatever the
// clocks. Here the replica that mints the tokens runs 10s ahead of the one
// that runs the call (within the verifier's 30s leeway): a token minted
// before the run carries an iat after the run's VoidBefore, and an iat rule
// alone would let it run the call a second time on the same request.
func TestApprovalRunVoidsTokensMintedOnASkewedReplica(t *testing.T) {
	for _, skew := range []time.Duration{10 * time.Second, -10 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			a := newTkApproval(t)
			var mu sync.Mutex
			base := time.Now()
			clock := func(skew time.Duration) func() time.Time {
				return func() time.Time { mu.Lock(); defer mu.Unlock(); return base.Add(skew) }
			}
			advance := func(d time.Duration) { mu.Lock(); base = base.Add(d); mu.Unlock() }
			store := gates.NewMemoryApprovalStore(gates.MemoryApprovalOptions{Now: clock(0)})
			v, err := gates.NewVerifier(gates.VerifierConfig{Type: gates.TypApproval, Keys: a.keys, MaxLifetime: gates.DefaultApprovalLifetime, Now: clock(0)})
			if err != nil {
				t.Fatal(err)
			}
			mk := func(skew time.Duration) *gates.Approval {
				g, err := gates.NewApproval(gates.ApprovalConfig{Verifier: v, Replay: a.replay, Store: store,
					Issuer: gates.TokenIssuer{Signer: a.signer}, RequestTTL: time.Minute, Now: clock(skew)})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			x, y := mk(0), mk(skew) // two replicas; y mints the tokens
			ctx := context.Background()
			run := func(g *gates.Approval, tokens ...string) (*middleware.Call, error) {
				c := a.call("vault.open", `{"vault":"main"}`)
				c.Credentials.Approvals = tokens
				_, err := g.Stage().Interceptor(ctx, c, middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
					return middleware.Result{Value: "ran"}, c.RunCommits(ctx)
				}))
				return c, err
			}
			bob := middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"admin"}}
			carol := middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"admin"}}
			dave := middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"admin"}}

			c, _ := run(x) // request opened
			id := c.Facts.ApprovalRequestID
			_, tBob, _, err := y.Decide(ctx, bob, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			advance(61 * time.Second) // the approved request lapses (RequestTTL 1m)
			run(x)                    // the same call asked again: a new pending request, same id
			_, tCarol, _, err := y.Decide(ctx, carol, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			advance(time.Second)
			if _, err := run(x, tBob); err != nil {
				t.Fatalf("first run: %v", err)
			}
			_, err = run(x, tCarol)
			assertVoid(t, err, "a token minted before the call ran on its request")

			// After the run, the call asked again and approved again: the
			// new token counts, even when its replica's clock is behind.
			advance(time.Second)
			run(x)
			_, tDave, _, err := y.Decide(ctx, dave, id, true, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := run(x, tDave); err != nil {
				t.Fatalf("a token minted after the run: %v", err)
			}
		})
	}
}

// assertVoid checks that err refuses a call because its only approval
// token is void.
func assertVoid(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s still counted: the call ran twice on one request", what)
	}
	d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if got := tkJSON(t, d["rejected_tokens"]); got != `[{"index":0,"reason":"void"}]` {
		t.Fatalf("%s: rejected_tokens = %s, want the token void", what, got)
	}
}
