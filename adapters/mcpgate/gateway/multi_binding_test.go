package gateway_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestMultiConfirmationStateRetaggedForAnotherUpstreamIsRefused: the
// request state of a confirmation question about upstream a's call,
// its upstream tag rewritten to b's by the client, does not pass b's
// same call (tool, intent, arguments) when the chains share an
// elicitation key: the upstream is bound inside the signed state, not
// only in a tag the client can rewrite.
func TestMultiConfirmationStateRetaggedForAnotherUpstreamIsRefused(t *testing.T) {
	t.Parallel()
	_, urlA := httpUpstream(t)
	nb, urlB := httpUpstream(t)
	key := bytes.Repeat([]byte{7}, mcpgate.ElicitationKeySize)
	g := newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlB}},
	}, gateway.WithTrustClientElicitation(), gateway.WithMCPOptions(mcpgate.WithElicitationKey(key)))
	cs := connectStateless(t, serve(t, g), "alice-token", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}})
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
