package gate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// tkProcess is the token gates of one run of a process: a replay store in
// memory made when it starts, and verifiers on its clock.
type tkProcess struct {
	confirm *gate.Confirmation
	approve *gate.Approval
}

// start starts a process at *now (its clock) on replay (a new memory store
// when nil).
func (a *tkApproval) start(t *testing.T, now *time.Time, replay token.ReplayStore) tkProcess {
	t.Helper()
	clock := func() time.Time { return *now }
	if replay == nil {
		replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: clock})
	}
	cv, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: a.keys, MaxLifetime: token.DefaultConfirmationLifetime, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	av, err := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: a.keys, MaxLifetime: token.DefaultApprovalLifetime, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	var p tkProcess
	if p.confirm, err = gate.NewConfirmation(gate.ConfirmationConfig{Verifier: cv, Replay: replay}); err != nil {
		t.Fatal(err)
	}
	if p.approve, err = gate.NewApproval(gate.ApprovalConfig{Verifier: av, Replay: replay, Now: clock,
		Store: memstore.NewApprovalStore(memstore.ApprovalOptions{Now: clock})}); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs c through the process's gate of its kind of token (vault.open,
// of high risk, would need both) and commits it, as the chain does.
func (p tkProcess) run(ctx context.Context, c *middleware.Call) error {
	gate := p.confirm.Stage()
	if len(c.Credentials.Approvals) > 0 {
		gate = p.approve.Stage()
	}
	_, err := middleware.Build(middleware.InvokerFunc(tkOK), nil, gate, tkCommit).Invoke(ctx, c)
	return err
}

// TestTokensIssuedBeforeAMemoryStoreStartedAreRefused: a replay store in
// memory forgets the tokens spent before a restart, so a confirmation and an
// approval token spent by the process before are refused after it
// (issued_before_start, saying that a restart voids outstanding tokens)
// rather than spent a second time; one minted after the start, even in the
// same second, passes. A store that outlives the process (Redis) keeps the
// rule it always had: the spent token is refused as already used, an
// unspent one from before the restart passes.
func TestTokensIssuedBeforeAMemoryStoreStartedAreRefused(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 500_000_000, time.UTC)
	mint := func(at time.Time) (confirmation, approval string) {
		t.Helper()
		is := token.Issuer{Signer: a.signer, Now: func() time.Time { return at }}
		d, err := a.call("order.refund", `{"order_id":"o-1","amount":25}`).ArgsSHA256()
		if err != nil {
			t.Fatal(err)
		}
		if confirmation, _, err = is.Confirmation(a.alice, "order.refund", d, time.Minute*5); err != nil {
			t.Fatal(err)
		}
		d, err = a.call("vault.open", `{"vault":"main"}`).ArgsSHA256()
		if err != nil {
			t.Fatal(err)
		}
		g := token.Grant{Intent: "vault.open", Tenant: "acme", ArgsSHA256: d, Requester: "alice"}
		if approval, _, err = is.Approval("bob", []string{"admin"}, g, time.Hour); err != nil {
			t.Fatal(err)
		}
		return confirmation, approval
	}
	refund := func(tok string) *middleware.Call {
		c := a.call("order.refund", `{"order_id":"o-1","amount":25}`)
		c.Credentials.Confirmation = tok
		return c
	}
	vault := func(tok string) *middleware.Call {
		c := a.call("vault.open", `{"vault":"main"}`)
		c.Credentials.Approvals = []string{tok}
		return c
	}

	now := t0
	first := a.start(t, &now, nil)
	conf, appr := mint(t0.Add(time.Second))
	if err := first.run(ctx, refund(conf)); err != nil {
		t.Fatalf("confirmed call before the restart: %v", err)
	}
	if err := first.run(ctx, vault(appr)); err != nil {
		t.Fatalf("approved call before the restart: %v", err)
	}

	now = t0.Add(time.Minute)
	restarted := a.start(t, &now, nil)
	d := tkRefusal(t, restarted.run(ctx, refund(conf)), axerr.CodeConfirmationMissing, 428)
	if d["reason"] != string(reasons.TokenIssuedBeforeStart) {
		t.Errorf("the confirmation spent before the restart, after it: reason %v, want %s", d["reason"], reasons.TokenIssuedBeforeStart)
	}
	if e, _ := axerr.As(restarted.run(ctx, refund(conf))); e == nil || !strings.Contains(e.Message, "a restart voids outstanding tokens") {
		t.Errorf("the refusal does not say why: %v", e)
	}
	d = tkRefusal(t, restarted.run(ctx, vault(appr)), axerr.CodeApprovalMissing, 428)
	if got := tkJSON(t, d["rejected_tokens"]); got != `[{"index":0,"reason":"issued_before_start"}]` {
		t.Errorf("the approval spent before the restart, after it: rejected_tokens %s", got)
	}

	// Minted in the second the process started (iat has whole seconds),
	// and after it: accepted.
	for _, at := range []time.Time{t0.Add(time.Minute).Truncate(time.Second), t0.Add(2 * time.Minute)} {
		now = at
		conf, appr := mint(at)
		if err := restarted.run(ctx, refund(conf)); err != nil {
			t.Errorf("a confirmation minted at %s, after the start: %v", at.Format(time.TimeOnly), err)
		}
		if err := restarted.run(ctx, vault(appr)); err != nil {
			t.Errorf("an approval minted at %s, after the start: %v", at.Format(time.TimeOnly), err)
		}
	}

	// A store that outlives the process: spent stays spent (already_used),
	// and a token not spent yet survives the restart.
	shared := tkPersistentReplay{token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: func() time.Time { return t0 }})}
	conf, _ = mint(t0.Add(time.Second))
	unspent, _ := mint(t0.Add(2 * time.Second))
	now = t0
	if err := a.start(t, &now, shared).run(ctx, refund(conf)); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(time.Minute)
	restarted = a.start(t, &now, shared)
	if d := tkRefusal(t, restarted.run(ctx, refund(conf)), axerr.CodeConfirmationMissing, 428); d["reason"] != string(reasons.TokenUsed) {
		t.Errorf("with a persistent store: reason %v, want %s", d["reason"], reasons.TokenUsed)
	}
	if err := restarted.run(ctx, refund(unspent)); err != nil {
		t.Errorf("with a persistent store, a token not spent before the restart: %v", err)
	}
}
