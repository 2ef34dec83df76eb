package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// TestMultiConfirmationStateRetaggedForAnotherUpstreamIsRefused: the
// request state of a confirmation question about upstream a's call,
// its upstream tag rewritten to b's by the client, does not pass b's
// same call (tool, intent, arguments) when the chains share an
// elicitation key: the upstream is bound inside the signed state, not
// only in a tag the client can rewrite.
func TestMultiConfirmationStateRetaggedForAnotherUpstreamIsRefused(t *testing.T) {
	t.Parallel()
	_, nb, cs := twoUpstreamsSharingAnElicitationKey(t)
	args := map[string]any{"name": "n", "text": "x"}
	res := call(t, cs, "a_write_note", args)
	inner, ok := strings.CutPrefix(res.RequestState, "a:")
	if !res.NeedsInput() || !ok {
		t.Fatalf("want a's confirmation question with a's state, got %+v (%s)", res, text(res))
	}
	accept := mcp.InputResponseMap{mcpgate.ConfirmationInputID: &mcp.ElicitResult{Action: "accept"}}
	other, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "b_write_note", Arguments: args, RequestState: "b:" + inner, InputResponses: accept})
	if err == nil && !other.IsError && !other.NeedsInput() {
		t.Errorf("a's answer, retagged, passed b's call: %s", text(other))
	}
	if n := len(nb.seenTool("write_note")); n != 0 {
		t.Errorf("b saw %d writes confirmed for a", n)
	}
}

// sharedPagesEnforcer is the enforcer of doc with the decision pages and
// the given stores, as `axgate mcp` makes each upstream's from one state.
func sharedPagesEnforcer(t *testing.T, doc []byte, approvals gates.ApprovalStore, replay token.ReplayStore) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, axgate.WithDecisionPages(pagesBase), axgate.WithApprovalStore(approvals), axgate.WithReplayStore(replay))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	return enf
}

// TestMultiDecisionOnThePageIsItsUpstreamsOnly: the person's confirmation
// on the page of upstream a's call does not run upstream b's same call
// (tool, intent, arguments) when their enforcers share the approval store
// (as the CLI's do); a's call, repeated, runs.
func TestMultiDecisionOnThePageIsItsUpstreamsOnly(t *testing.T) {
	t.Parallel()
	na, urlA := httpUpstream(t)
	nb, urlB := httpUpstream(t)
	approvals := memstore.NewApprovalStore(memstore.ApprovalOptions{})
	replay := token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	enfA := sharedPagesEnforcer(t, toolsOnlyManifest(t, ""), approvals, replay)
	enfB := sharedPagesEnforcer(t, toolsOnlyManifest(t, ""), approvals, replay)
	g := newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: enfA, Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: enfB, Upstream: gateway.Upstream{URL: urlB}},
	})
	cs := connect(t, serve(t, g), "alice-token", nil)
	args := map[string]any{"name": "n", "text": "x"}
	r := wantRefusal(t, call(t, cs, "a_write_note", args), "AXAG_CONFIRMATION_MISSING", "")
	id, _ := r.Details["decision_id"].(string)
	alice := middleware.Principal{ID: "alice", Roles: []string{"user"}}
	if req, err := enfA.Approvals().Request(context.Background(), alice, id); err != nil || req.Scope != "a" {
		t.Errorf("a's request %q names scope %q (%v), want a: its page shows the upstream", id, req.Scope, err)
	}
	if _, _, _, err := enfA.Approvals().Decide(context.Background(), alice, id, true, ""); err != nil {
		t.Fatalf("deciding a's call %q: %v", id, err)
	}
	if res := call(t, cs, "b_write_note", args); !res.IsError {
		t.Errorf("a's decision ran b's call: %s", text(res))
	}
	if n := len(nb.seenTool("write_note")); n != 0 {
		t.Errorf("b saw %d writes decided for a", n)
	}
	if res := call(t, cs, "a_write_note", args); res.IsError {
		t.Errorf("a's call after its decision: %s", text(res))
	}
	if n := len(na.seenTool("write_note")); n != 1 {
		t.Errorf("a saw %d writes, want 1", n)
	}
}
