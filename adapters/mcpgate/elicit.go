package mcpgate

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/middleware"
)

// ConfirmationInputID is the id of the confirmation question in an
// input-required result (MCP multi round-trip requests).
const ConfirmationInputID = "axag/confirmation"

// ErrElicitationPending is what Call.Elicit returns on the first pass of a
// call whose confirmation the person has not answered yet: the adapter then
// answers with the question, and the call comes again with the answer.
var ErrElicitationPending = errors.New("mcpgate: the confirmation question is on its way to the person")

// confirmSchema is the form of a yes/no question: no fields, the person's
// accept or decline is the answer.
var confirmSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// elicitation asks for a confirmation through the MCP client.
//
// The SDK's multi round-trip requests do the asking: on the first pass, ask
// records the question and the handler answers "input required" with an
// elicitation request; the client shows it to the person (a client on an
// older protocol is asked by the SDK itself, with elicitation/create) and
// calls the tool again with the answer, which ask then returns. The whole
// chain runs on each pass, so every gate before the confirmation sees the
// call again and the handler stays innermost.
type elicitation struct {
	answered bool
	accepted bool
	question string
	digest   string
}

// elicitation returns nil when the client cannot be asked.
func (c config) elicitation(req *mcp.CallToolRequest) *elicitation {
	if c.noElicitation {
		return nil
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return nil
	}
	if caps.Elicitation.Form == nil && caps.Elicitation.URL != nil {
		return nil // URL mode only: it cannot show a yes/no question.
	}
	el := &elicitation{}
	if r, ok := req.Params.InputResponses[ConfirmationInputID].(*mcp.ElicitResult); ok && r != nil {
		el.answered = true
		el.accepted = r.Action == "accept"
		el.digest = req.Params.RequestState
	}
	return el
}

func (el *elicitation) ask(_ context.Context, call *middleware.Call, message string) (bool, error) {
	if el.answered {
		// The answer is for the arguments the question was about: the
		// request state carries their digest.
		if d, err := call.ArgsSHA256(); err == nil && d == el.digest {
			return el.accepted, nil
		}
	}
	el.question = message
	return false, ErrElicitationPending
}

// inputRequired is the result that asks the person.
func (el *elicitation) inputRequired(call *middleware.Call) *mcp.CallToolResult {
	digest, _ := call.ArgsSHA256()
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{
			ConfirmationInputID: &mcp.ElicitParams{
				Mode:            "form",
				Message:         el.question,
				RequestedSchema: confirmSchema,
			},
		},
		RequestState: digest,
	}
}
