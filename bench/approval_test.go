package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const approvalBenchManifest = `{"version":"1.0.0","actions":[
 {"intent":"refund.issue","entity":"refund","action_type":"write","description":"Issue a refund",
  "risk_level":"medium","approval_required":true,"approval_roles":["manager"],
  "required_parameters":[{"name":"amount","type":"number","description":"The amount"}]}
]}`

var approvalBenchArgs = json.RawMessage(`{"amount":25}`)

// BenchmarkApprovalGate is one call through intent → approval → commit →
// tool, on the memory stores and on Redis. It uses only the API that the
// gate had before the approval quota (it builds on both, for the
// before/after comparison in bench/README.md).
//
//   - new_request: a call without approval, each by a requester of its own
//     (under any quota): the gate opens a request (428).
//   - pending_again: the same call again while its request is pending: the
//     gate finds the request (428).
//   - approved_run: a call with the approval token Decide issued for its
//     request: it runs.
//
// rt/op counts round trips to Redis per call.
func BenchmarkApprovalGate(b *testing.B) {
	m, err := manifest.Parse([]byte(approvalBenchManifest))
	if err != nil {
		b.Fatal(err)
	}
	signer, err := token.GenerateDevKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	keys, err := token.NewKeySet(signer.PublicKey())
	if err != nil {
		b.Fatal(err)
	}
	verifier, err := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: keys, MaxLifetime: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	intent := gate.Intent(m, middleware.Limits{})
	boss := middleware.Principal{ID: "boss", Tenant: "acme", Roles: []string{"manager"}}
	requester := func(run string, i int) middleware.Principal {
		return middleware.Principal{ID: fmt.Sprintf("%s-%d", run, i), Tenant: "acme", Roles: []string{"agent"}}
	}
	for _, name := range storeNames {
		b.Run("store="+name, func(b *testing.B) {
			s := newBenchStore(b, name)
			store := gates.ApprovalStore(gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{}))
			if name == "redis" {
				rs, n := redisBenchStores(b)
				store, s.replay, s.rt = rs.Approvals, rs.Replay, n
			}
			g, err := gate.NewApproval(gate.ApprovalConfig{Verifier: verifier, Replay: s.replay, Store: store, Issuer: token.Issuer{Signer: signer}})
			if err != nil {
				b.Fatal(err)
			}
			inv := middleware.Build(okTool, nil, intent, g.Stage(), commitStage)
			ctx := context.Background()
			call := func(p middleware.Principal, tokens ...string) *middleware.Call {
				c := middleware.NewCall("refund_issue", approvalBenchArgs, p)
				c.Credentials.Approvals = tokens
				return c
			}
			// requestID opens the request of p's call and returns its id.
			requestID := func(p middleware.Principal) string {
				if _, err := inv.Invoke(ctx, call(p)); err == nil {
					b.Fatal("a call without approval ran")
				}
				d, err := call(p).ArgsSHA256()
				if err != nil {
					b.Fatal(err)
				}
				return gate.ApprovalRequestID("refund.issue", d, p.ID, p.Tenant, "")
			}
			requestID(requester("warm", 0)) // load the scripts
			reset := func() {
				if s.rt != nil {
					s.rt.Reset()
				}
			}
			b.Run("new_request", func(b *testing.B) {
				reset()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(ctx, call(requester("new", i))); err == nil {
						b.Fatal("a call without approval ran")
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
			b.Run("pending_again", func(b *testing.B) {
				p := requester("again", 0)
				requestID(p)
				reset()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := inv.Invoke(ctx, call(p)); err == nil {
						b.Fatal("a call without approval ran")
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
			b.Run("approved_run", func(b *testing.B) {
				tokens := make([]string, b.N)
				run := fmt.Sprint("run-", b.N)
				for i := range b.N {
					_, tok, _, err := g.Decide(ctx, boss, requestID(requester(run, i)), true, "")
					if err != nil {
						b.Fatal(err)
					}
					tokens[i] = tok
				}
				reset()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := inv.Invoke(ctx, call(requester(run, i), tokens[i])); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRoundTrips(b, s, b.N)
			})
		})
	}
}
