package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The policy benchmarks run testdata/policy/hotel.json:
//   - read: hotel.search (scope global, no roles, no tokens, no limit), the
//     common case every call pays for;
//   - write: booking.create (required_roles, scope tenant with a strict
//     boundary and a tenant-naming argument, parameters with a date format,
//     three CEL constraints, a rate limit).
var (
	policyReadArgs  = []byte(`{"city":"Lyon","stars":3,"limit":20}`)
	policyWriteArgs = []byte(`{"hotel_id":"h-1842","check_in":"2026-05-01","check_out":"2026-05-04","guests":2,"org_id":"acme","max_rate":180}`)
	policyCaller    = middleware.Principal{ID: "u-1", Tenant: "acme", Roles: []string{"traveller"}}
)

func policyManifest(b *testing.B) *manifest.Manifest {
	b.Helper()
	m, err := manifest.LoadFile(filepath.Join("..", "testdata", "policy", "hotel.json"))
	if err != nil {
		b.Fatal(err)
	}
	// A limit the benchmark never reaches: the gate looks and charges on
	// every call, and never refuses.
	m.Action("booking.create").RateLimit = &manifest.RateLimit{Count: 1_000_000_000, Per: time.Second, Spec: "1000000000/second"}
	return m
}

// BenchmarkPolicy measures, in one run, the whole standard chain through
// Enforcer.Wrap (observability off) for a read and a write action beside
// the parameter gate alone, and each policy gate alone.
//
//	chain        a fresh Call through the standard chain and a no-op tool
//	params       a fresh Call through the parameter gate alone (strict
//	             decoding and the compiled schema): the baseline
//	gate=…       one gate alone on a Call whose arguments are already
//	             decoded (the decoding is counted once, in params)
func BenchmarkPolicy(b *testing.B) {
	m := policyManifest(b)
	enf, err := axgate.New(m, telemetryOff())
	if err != nil {
		b.Fatal(err)
	}
	defer enf.Close()
	chain := enf.Wrap(okTool)
	params, err := gate.NewParams(m, false)
	if err != nil {
		b.Fatal(err)
	}
	access := gate.NewAccess(m, gates.AccessOptions{})
	constraints, err := gate.NewConstraints(m)
	if err != nil {
		b.Fatal(err)
	}
	pre, err := gate.NewPreconditions(m, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	post, err := gate.NewPostconditions(m, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	intent := gate.Intent(m, middleware.Limits{})
	rate := middleware.Build(okTool, nil, gate.RateLimit(gate.NewMemoryLimiter(0)), commitStage)
	ctx := context.Background()

	for _, tc := range []struct {
		name, tool, intent string
		args               []byte
	}{
		{"read", "hotel_search", "hotel.search", policyReadArgs},
		{"write", "booking_create", "booking.create", policyWriteArgs},
	} {
		action := m.Action(tc.intent)
		// decoded is a call whose arguments are decoded once, for the gates
		// measured alone.
		decoded := func(b *testing.B) *middleware.Call {
			c := middleware.NewCall(tc.tool, tc.args, policyCaller)
			c.Action = action
			if _, err := c.Args(); err != nil {
				b.Fatal(err)
			}
			return c
		}
		b.Run(tc.name+"/chain", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := chain.Invoke(ctx, middleware.NewCall(tc.tool, tc.args, policyCaller)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/params", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := middleware.NewCall(tc.tool, tc.args, policyCaller)
				c.Action = action
				if err := params.Check(c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=intent", func(b *testing.B) {
			inv := middleware.Build(okTool, nil, intent)
			c := decoded(b)
			b.ReportAllocs()
			for b.Loop() {
				c.Action = nil
				if _, err := inv.Invoke(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=access", func(b *testing.B) {
			c := decoded(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := access.Check(c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=constraints", func(b *testing.B) {
			c := decoded(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := constraints.Check(c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=preconditions", func(b *testing.B) {
			c := decoded(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := pre.Check(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=ratelimit", func(b *testing.B) {
			// A fresh call each time: the gate leaves a commit on it.
			b.ReportAllocs()
			for b.Loop() {
				c := middleware.NewCall(tc.tool, tc.args, policyCaller)
				c.Action = action
				if _, err := rate.Invoke(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/gate=postconditions", func(b *testing.B) {
			c := decoded(b)
			res := middleware.Result{Value: "ok"}
			b.ReportAllocs()
			for b.Loop() {
				if err := post.Check(ctx, c, res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
