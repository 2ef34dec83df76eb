package bench

import (
	"context"
	"crypto/ed25519"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sys/unix"

	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// tokBench is the confirmation gate on order.place (testdata/axag/shop-full.json: high
// risk, confirmation_required) with an Ed25519 key, and a token for one call.
type tokBench struct {
	action *manifest.Action
	gate   middleware.Interceptor
	replay token.ReplayStore
	issuer token.Issuer
	pub    ed25519.PublicKey
	who    middleware.Principal
	digest string
	token  string
}

func newTokBench(b *testing.B) *tokBench {
	b.Helper()
	m := loadFull(b)
	signer, err := token.GenerateDevKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	keys, err := token.NewKeySet(signer.PublicKey())
	if err != nil {
		b.Fatal(err)
	}
	v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: keys, MaxLifetime: token.DefaultConfirmationLifetime})
	if err != nil {
		b.Fatal(err)
	}
	tb := &tokBench{
		action: m.Tool("order_place"),
		replay: token.NewMemoryReplayStore(token.MemoryReplayOptions{}),
		issuer: token.Issuer{Signer: signer},
		pub:    signer.PublicKey().Public.(ed25519.PublicKey),
		who:    middleware.Principal{ID: "user-1", Tenant: "acme"},
	}
	g, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: v, Replay: tb.replay})
	if err != nil {
		b.Fatal(err)
	}
	tb.gate = g.Stage().Interceptor
	tb.digest, err = tb.call("").ArgsSHA256()
	if err != nil {
		b.Fatal(err)
	}
	tb.token = tb.mint(b)
	return tb
}

func (tb *tokBench) mint(b *testing.B) string {
	tok, _, err := tb.issuer.Confirmation(tb.who, tb.action.Intent, tb.digest, token.DefaultConfirmationLifetime)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

func (tb *tokBench) call(token string) *middleware.Call {
	c := middleware.NewCall("order_place", orderPlaceArgs, tb.who)
	c.Action = tb.action
	c.Credentials.Confirmation = token
	return c
}

// tokCPU is the process's CPU time (all threads). On the shared machine wall
// time mostly measures the neighbours; cpu-ns/op does not.
func tokCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func tokReportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(tokCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

var tokNext = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{}, nil
})

// BenchmarkConfirmationGate is the whole confirmation gate for one call with
// an EdDSA token: size cap, header checks, key by kid, signature, claims,
// JCS + SHA-256 of the arguments (a new Call each time, so nothing is
// cached), binding, the replay-store lookup and the deferred spend. The
// spend itself runs at commit; see BenchmarkConfirmationGateAndSpend.
func BenchmarkConfirmationGate(b *testing.B) {
	tb := newTokBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := tokCPU()
	for b.Loop() {
		if _, err := tb.gate(ctx, tb.call(tb.token), tokNext); err != nil {
			b.Fatal(err)
		}
	}
	tokReportCPU(b, cpu)
}

// BenchmarkBareJWTEdDSA is golang-jwt v5 alone on the same token: parse,
// verify the EdDSA signature and validate the registered claims (its
// defaults), with the key given directly.
func BenchmarkBareJWTEdDSA(b *testing.B) {
	tb := newTokBench(b)
	keyfunc := func(*jwt.Token) (any, error) { return tb.pub, nil }
	b.ReportAllocs()
	cpu := tokCPU()
	for b.Loop() {
		tok, err := jwt.Parse(tb.token, keyfunc, jwt.WithValidMethods([]string{"EdDSA"}))
		if err != nil || !tok.Valid {
			b.Fatal(err)
		}
	}
	tokReportCPU(b, cpu)
}

// BenchmarkConfirmationGateAndSpend adds the commit: each iteration presents
// a fresh token and marks it used in the memory replay store.
func BenchmarkConfirmationGateAndSpend(b *testing.B) {
	tb := newTokBench(b)
	ctx := context.Background()
	tokens := make([]string, b.N)
	for i := range tokens {
		tokens[i] = tb.mint(b)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := tokCPU()
	for i := 0; i < b.N; i++ {
		c := tb.call(tokens[i])
		if _, err := tb.gate(ctx, c, tokNext); err != nil {
			b.Fatal(err)
		}
		if err := c.RunCommits(ctx); err != nil {
			b.Fatal(err)
		}
	}
	tokReportCPU(b, cpu)
}

// BenchmarkConfirmationGateOverBare runs the gate and the bare golang-jwt
// parse of the same token in alternating blocks of 16 calls and charges
// each block the process CPU time it took (clock_gettime), so that a busy
// machine, which inflates wall time, does not decide the comparison. It
// reports both CPU times per call and their ratio; ns/op is the wall time of
// one gate call plus one bare parse.
func BenchmarkConfirmationGateOverBare(b *testing.B) {
	tb := newTokBench(b)
	ctx := context.Background()
	keyfunc := func(*jwt.Token) (any, error) { return tb.pub, nil }
	const block = 16
	var gate, bare time.Duration
	runGate := func() {
		for range block {
			if _, err := tb.gate(ctx, tb.call(tb.token), tokNext); err != nil {
				b.Fatal(err)
			}
		}
	}
	runBare := func() {
		for range block {
			if tok, err := jwt.Parse(tb.token, keyfunc, jwt.WithValidMethods([]string{"EdDSA"})); err != nil || !tok.Valid {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		t0 := tokProcessCPU()
		if n%2 == 0 {
			runGate()
		} else {
			runBare()
		}
		t1 := tokProcessCPU()
		if n%2 == 0 {
			runBare()
		} else {
			runGate()
		}
		t2 := tokProcessCPU()
		if n%2 == 0 {
			gate, bare = gate+t1-t0, bare+t2-t1
		} else {
			bare, gate = bare+t1-t0, gate+t2-t1
		}
		n++
	}
	calls := float64(n * block)
	b.ReportMetric(float64(gate)/calls, "gate-cpu-ns/call")
	b.ReportMetric(float64(bare)/calls, "bare-cpu-ns/call")
	b.ReportMetric(float64(gate)/float64(bare), "gate/bare")
	b.ReportMetric(0, "ns/op") // wall time of blocks says nothing per call
}

// tokProcessCPU is the process's CPU time with nanosecond resolution.
func tokProcessCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
