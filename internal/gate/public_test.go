package gate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
)

// TestVoidedTokenBoundAgrees: the gate (VoidMinted) and a store (Inherit, in
// package gates) keep a request's voided tokens under the same bound, so a
// request keeps the same tokens whichever of them touched it last.
func TestVoidedTokenBoundAgrees(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tokens := make([]gates.MintedToken, gate.MaxVoidedTokens+44)
	for i := range tokens {
		tokens[i] = gates.MintedToken{ID: fmt.Sprint("jti-", i), Until: now.Add(time.Hour)}
	}
	r := gates.ApprovalRequest{Minted: tokens}
	gate.VoidMinted(&r, now)
	if len(r.Voided) != gate.MaxVoidedTokens {
		t.Fatalf("VoidMinted keeps %d voided tokens; want %d", len(r.Voided), gate.MaxVoidedTokens)
	}
	old := gates.ApprovalRequest{Voided: tokens}
	r = gates.ApprovalRequest{CreatedAt: now}
	r.Inherit(&old)
	if len(r.Voided) != gate.MaxVoidedTokens {
		t.Fatalf("Inherit keeps %d voided tokens; want %d, as VoidMinted", len(r.Voided), gate.MaxVoidedTokens)
	}
}
