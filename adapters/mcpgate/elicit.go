package mcpgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// ConfirmationInputID is the id of the confirmation question in an
// input-required result (MCP multi round-trip requests).
const ConfirmationInputID = "axag/confirmation"

// DecisionInputID is the id of the URL-mode elicitation request that sends
// the person to the page of a call waiting for their decision (MCP multi
// round-trip requests; URL-mode elicitation on older protocols).
const DecisionInputID = "axag/decision"

// defaultElicitationTTL is how long the person has to answer a confirmation
// question asked inline, unless WithElicitationTTL says otherwise.
const defaultElicitationTTL = 5 * time.Minute

// ElicitationKeySize is the size of the key that signs the request state of
// a confirmation question (HMAC-SHA256), and the least WithElicitationKey
// accepts.
const ElicitationKeySize = 32

// ErrElicitationPending is what Call.Elicit returns on the first pass of a
// call whose confirmation the person has not answered yet: the adapter then
// answers with the question, and the call comes again with the answer.
var ErrElicitationPending = errors.New("mcpgate: the confirmation question is on its way to the person")

// ErrElicitationStateInvalid is what Call.Elicit returns for an answer it cannot take.
//
// It is returned when a call carries an answer whose request state the
// adapter did not issue for this very call (another tool, other arguments,
// another principal or tenant), that expired, or that was already answered.
// The call is refused with AXAG_CONFIRMATION_MISSING, reason
// "elicitation_state_invalid".
var ErrElicitationStateInvalid = errors.New("mcpgate: the answer's request state was not issued for this call, expired, or was already used")

// confirmSchema is the form of a yes/no question: no fields, the person's
// accept or decline is the answer.
var confirmSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// WithElicitationKey sets the key signing the request state of confirmation questions asked inline.
//
// By default each AddTools or ToolHandler generates a random key, which is
// right for one process; servers behind a load balancer, where the answer may
// reach another replica than the question, share one secret key of at least
// ElicitationKeySize random bytes (and a shared WithElicitationReplayStore).
// A shorter key is a programming error: WithElicitationKey panics.
func WithElicitationKey(key []byte) Option {
	if len(key) < ElicitationKeySize {
		panic("mcpgate: WithElicitationKey needs at least 32 bytes of key")
	}
	k := bytes.Clone(key)
	return func(c *config) { c.elicit.key = k }
}

// WithElicitationTTL sets how long the person has to answer a confirmation
// question asked inline (5 minutes when d is not positive). A
// later answer is refused; the agent calls again and the person is asked
// again.
func WithElicitationTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.elicit.ttl = d
		}
	}
}

// WithElicitationReplayStore records answered confirmation questions so each answer is taken once.
//
// By default each AddTools or ToolHandler keeps them in memory; replicas that
// share WithElicitationKey share a store too (such as redisstore's
// ReplayStore). A store that fails refuses the call with
// AXGATE_STORE_UNAVAILABLE.
func WithElicitationReplayStore(s token.ReplayStore) Option {
	return func(c *config) { c.elicit.replay = s }
}

// elicitKeys signs and checks the request state of confirmation questions.
type elicitKeys struct {
	key    []byte
	ttl    time.Duration
	replay token.ReplayStore
	now    func() time.Time
}

// init fills what the options left unset: a fresh random key and an
// in-memory record of the answered questions.
func (k *elicitKeys) init() {
	if k.now == nil {
		k.now = time.Now
	}
	if k.key == nil {
		k.key = make([]byte, ElicitationKeySize)
		rand.Read(k.key) // crypto/rand.Read never fails (it crashes the program instead).
	}
	if k.ttl <= 0 {
		k.ttl = defaultElicitationTTL
	}
	if k.replay == nil {
		k.replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: k.now})
	}
}

// questionState is what the request state of a confirmation question says:
// the one call it was asked about, until when, and a random id that makes
// each question answerable once.
type questionState struct {
	Tool      string
	Intent    string
	Principal string
	Tenant    string
	Args      string
	// Kind is "" for a confirmation question asked by form, "decision"
	// for a person sent to the page of the call: the state of one is
	// never taken for the other.
	Kind string
}

// stateFor describes call, or fails when its arguments cannot be digested.
func stateFor(call *middleware.Call) (questionState, error) {
	digest, err := call.ArgsSHA256()
	if err != nil {
		return questionState{}, err
	}
	return questionState{Tool: call.Tool, Intent: call.Intent(), Principal: call.Principal.ID, Tenant: call.Principal.Tenant, Args: digest}, nil
}

// stateAudience separates these states from any other use of the key: a
// state names it as its audience, and no other one is taken.
const stateAudience = "axgate/mcpgate/elicitation-state/v1"

// stateClaims is a questionState as the claims of the JWT (HS256, with the
// adapter's key) that is the request state.
type stateClaims struct {
	Tool   string `json:"tool"`
	Intent string `json:"intent"`
	Tenant string `json:"tenant"`
	Args   string `json:"args_sha256"`
	Kind   string `json:"kind,omitempty"`
	jwt.RegisteredClaims
}

// sign returns the request state of a new question about s: a JWT signed
// with HMAC-SHA256 (golang-jwt), naming the call, until when, and a random
// id.
func (k *elicitKeys) sign(s questionState) (string, error) {
	var id [16]byte
	rand.Read(id[:])
	claims := stateClaims{Tool: s.Tool, Intent: s.Intent, Tenant: s.Tenant, Args: s.Args, Kind: s.Kind,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   s.Principal,
			Audience:  jwt.ClaimStrings{stateAudience},
			ExpiresAt: jwt.NewNumericDate(k.now().Add(k.ttl)),
			ID:        base64.RawURLEncoding.EncodeToString(id[:]),
		}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(k.key)
}

// verify reports whether state is a question this adapter asked about
// exactly the call want describes, still open, and answers it (records its
// id, so that no other answer is taken for it). It fails with
// ErrElicitationStateInvalid, or with the replay store's failure.
func (k *elicitKeys) verify(ctx context.Context, state string, want questionState) error {
	var got stateClaims
	_, err := jwt.ParseWithClaims(state, &got, func(*jwt.Token) (any, error) { return k.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(stateAudience), jwt.WithTimeFunc(k.now))
	if err != nil || got.ID == "" || got.ExpiresAt == nil {
		return ErrElicitationStateInvalid
	}
	expires := got.ExpiresAt.Time
	if !k.now().Before(expires) {
		return ErrElicitationStateInvalid
	}
	if (questionState{Tool: got.Tool, Intent: got.Intent, Principal: got.Subject, Tenant: got.Tenant, Args: got.Args, Kind: got.Kind}) !=
		(questionState{Tool: want.Tool, Intent: want.Intent, Principal: want.Principal, Tenant: want.Tenant, Args: want.Args, Kind: want.Kind}) {
		return ErrElicitationStateInvalid
	}
	err = k.replay.Consume(ctx, []token.Use{{ID: "mcpgate-elicitation:" + got.ID, Expires: expires, Tenant: got.Tenant}})
	switch {
	case errors.Is(err, token.ErrReplayed):
		return ErrElicitationStateInvalid
	case err != nil:
		return gate.StoreUnavailable(want.Intent, "the elicitation replay store", err)
	}
	return nil
}

// elicitation asks for a confirmation through the MCP client, or sends
// the person to the page of the call.
//
// The SDK's multi round-trip requests do the asking: on the first pass, ask
// records the question and the handler answers "input required" with an
// elicitation request and a request state; the client shows the question to
// the person (a client on an older protocol is asked by the SDK itself, with
// elicitation/create) and calls the tool again with the answer and the
// state, which ask then checks and returns. The whole chain runs on each
// pass, so every gate before the confirmation sees the call again and the
// handler stays innermost.
//
// The client sends both the answer and the state, so the state is what
// proves that the server asked: it is signed with the adapter's key, names
// the one call it was asked about (tool, intent, principal, tenant, digest of
// the arguments), expires, and is taken once.
//
// A form question is asked only where the client's answer is trusted to
// be the person's (not WithoutElicitation). A call refused for a decision
// held on a page (details "decision_url", axgate.WithDecisionPages) is
// answered, for a client that declares URL-mode elicitation, with a
// URL-mode request for that page: the client's answer there only says that
// the person went to it; the call's retry runs when the person decided
// there, and is refused otherwise.
type elicitation struct {
	keys     *elicitKeys
	form     bool // the client may be asked a form question
	url      bool // the client can be sent to a page (URL mode)
	answered bool
	accepted bool
	state    string // the answer's request state
	question string // set when the question is to be asked
	asked    string // the request state of the question asked
	invalid  bool   // the answer's state was refused
	storeErr error  // the replay store failed

	// decided: the call comes back from the page of its decision, with
	// decisionState.
	decided       bool
	decisionState string
}

// elicitation returns nil when the client can be neither asked nor sent to
// a page. The client's capabilities are read only when the call's chain
// may ask (mayAsk); otherwise the client is taken to offer neither.
func (c config) elicitation(req *mcp.CallToolRequest, mayAsk bool) *elicitation {
	var caps *mcp.ClientCapabilities
	if mayAsk {
		caps = req.ClientCapabilities()
	}
	el := &elicitation{keys: c.elicit}
	if r, ok := req.Params.InputResponses[DecisionInputID].(*mcp.ElicitResult); ok && r != nil {
		el.decided = true
		el.decisionState = req.Params.RequestState
	}
	if caps != nil && caps.Elicitation != nil {
		el.url = caps.Elicitation.URL != nil
		// URL mode only cannot show a yes/no question.
		el.form = !c.noElicitation && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
	}
	if el.form {
		if r, ok := req.Params.InputResponses[ConfirmationInputID].(*mcp.ElicitResult); ok && r != nil {
			el.answered = true
			el.accepted = r.Action == "accept"
			el.state = req.Params.RequestState
		}
	}
	if !el.form && !el.url && !el.decided {
		return nil
	}
	return el
}

func (el *elicitation) ask(ctx context.Context, call *middleware.Call, message string) (bool, error) {
	want, err := stateFor(call)
	if err != nil {
		return false, err
	}
	if el.answered {
		verr := el.keys.verify(ctx, el.state, want)
		switch {
		case verr == nil:
			return el.accepted, nil
		case errors.Is(verr, ErrElicitationStateInvalid):
			el.invalid = true
		default:
			el.storeErr = verr
		}
		return false, verr
	}
	if el.asked, err = el.keys.sign(want); err != nil {
		return false, err
	}
	el.question = message
	return false, ErrElicitationPending
}

// checkDecision verifies the request state the call came back from the
// page of its decision with: issued by this adapter (or a replica sharing
// WithElicitationKey) for exactly this call, unexpired, taken once.
// The chain has not run yet, so the call's intent is the manifest's
// action of its tool (intent: "" when there is none, which no state names).
func (el *elicitation) checkDecision(ctx context.Context, call *middleware.Call, intent string) error {
	want, err := stateFor(call)
	if err != nil {
		return err
	}
	want.Intent, want.Kind = intent, decisionKind
	return el.keys.verify(ctx, el.decisionState, want)
}

// decisionKind marks the request state of a person sent to a page.
const decisionKind = "decision"

// sendToPage is the result that sends the person to the page of the call
// refused by ae (its details name the page), or nil when the client cannot
// be sent there.
func (el *elicitation) sendToPage(call *middleware.Call, ae *axerr.Error) (*mcp.CallToolResult, error) {
	if el == nil || !el.url || el.decided {
		return nil, nil
	}
	if ae.Code != axerr.CodeConfirmationMissing && ae.Code != axerr.CodeApprovalMissing {
		return nil, nil
	}
	if ae.Details["reason"] != nil {
		// Decided already (declined, vetoed, used by a call that ran):
		// the refusal says what to do, the page has nothing to ask.
		return nil, nil
	}
	page, _ := ae.Details["decision_url"].(string)
	id, _ := ae.Details["decision_id"].(string)
	if page == "" {
		return nil, nil
	}
	want, err := stateFor(call)
	if err != nil {
		return nil, err
	}
	want.Kind = decisionKind
	state, err := el.keys.sign(want)
	if err != nil {
		return nil, err
	}
	msg := "Please confirm or deny this call on its page: " + ae.Message
	if ae.Code == axerr.CodeApprovalMissing {
		msg = "This call waits for approval on its page: " + ae.Message
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{
			DecisionInputID: &mcp.ElicitParams{Mode: "url", Message: msg, URL: page, ElicitationID: id},
		},
		RequestState: state,
	}, nil
}

// inputRequired is the result that asks the person.
func (el *elicitation) inputRequired() *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{
			ConfirmationInputID: &mcp.ElicitParams{
				Mode:            "form",
				Message:         el.question,
				RequestedSchema: confirmSchema,
			},
		},
		RequestState: el.asked,
	}
}
