package axgate_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// Attacks on decisions held server-side (axgate.WithDecisionPages): each
// test pins what an attacker cannot do.

// TestDecideAnotherTenantsApprovalWithoutSignerReadsAsUnknown: an enforcer
// that only verifies tokens (no signing key) cannot tell a person of another
// tenant that an approval request exists: approving it is refused exactly
// as approving an unknown id is (request_not_found), never with the
// "no signing key" error that only an existing request reaches.
func TestDecideAnotherTenantsApprovalWithoutSignerReadsAsUnknown(t *testing.T) {
	dev, err := token.GenerateDevKey("verify-only")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := token.NewKeySet(dev.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase), axgate.WithTokens(axgate.TokenOptions{Keys: ks}))
	ctx := t.Context()
	id := pageRequest(t, e, "payout_send", `{"amount":5}`, tokAlice, axerr.CodeApprovalMissing)
	globexAdmin := middleware.Principal{ID: "mallory", Tenant: "globex", Roles: []string{"finance", "admin"}}
	unknown := "apr_AAAAAAAAAAAAAAAAAAAAAAAA"
	for _, probe := range []string{id, unknown} {
		_, _, _, err := e.Approvals().Decide(ctx, globexAdmin, probe, true, "")
		if !errors.Is(err, gates.ErrNotFound) {
			t.Errorf("approving %s from another tenant: %v, want request_not_found", probe, err)
			continue
		}
		if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, http.StatusForbidden); d["reason"] != "request_not_found" {
			t.Errorf("approving %s from another tenant: %v", probe, d)
		}
	}
	// The requester approving their own call is told so, not "no key".
	_, _, _, err = e.Approvals().Decide(ctx, tokAlice, id, true, "")
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, http.StatusForbidden); d["reason"] != "self_approval" {
		t.Errorf("self approval without a signer: %v", d)
	}
}
