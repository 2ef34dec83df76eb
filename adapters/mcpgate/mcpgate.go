package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/middleware"
)

// Handlers binds tool names (the manifest action's tool name: its
// operation_id, or its intent with dots replaced by underscores) to the Go
// code that runs them.
type Handlers map[string]middleware.Invoker

// PrincipalFunc returns the authenticated caller of a tool call. It must take
// the principal from the transport's authentication (the request's
// TokenInfo, a session the server authenticated), never from the arguments.
// An error refuses the call with AXGATE_UNAUTHENTICATED.
type PrincipalFunc func(ctx context.Context, req *mcp.CallToolRequest) (middleware.Principal, error)

// Option configures the adapter.
type Option func(*config)

type config struct {
	principal      PrincipalFunc
	rpcParamErrors bool
	noElicitation  bool
	noHeaders      bool
	confirmHelp    func(*middleware.Call) string
	propagator     propagation.TextMapPropagator
	elicit         *elicitKeys // shared by every handler of one AddTools or ToolHandler
}

func newConfig(opts []Option) config {
	c := config{
		principal:  BearerPrincipal,
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		elicit:     &elicitKeys{},
	}
	for _, o := range opts {
		o(&c)
	}
	c.elicit.init()
	return c
}

// WithPrincipal replaces how the caller is found.
//
// The default, BearerPrincipal, reads the bearer token the streamable
// HTTP transport verified (auth.RequireBearerToken); a stdio server, which
// has no transport authentication, serves the local user who started it: use
// StaticPrincipal.
func WithPrincipal(f PrincipalFunc) Option { return func(c *config) { c.principal = f } }

// WithJSONRPCParamErrors answers parameter refusals with a JSON-RPC error -32602 (invalid params).
//
// Those are the refusals for a missing parameter, a wrong type, a value out
// of range, a bad enum or format, an unknown parameter and malformed
// arguments. The error's data carries the AXAG code, type and details, and
// the violations in data.errors. Clients that surface protocol errors to the
// model can use it; by default every refusal is a tool result with isError,
// which every client shows to the model.
func WithJSONRPCParamErrors() Option { return func(c *config) { c.rpcParamErrors = true } }

// WithoutElicitation never asks the confirmation question by form elicitation, even when the client can.
//
// A confirmation then needs a signed token, or a decision the person gave
// on the page of the call (axgate.WithDecisionPages: a client that declares
// URL-mode elicitation is still sent there, since the answer that counts is
// given on the page, not by the client). Use it when the client is not
// trusted to show the question to the person itself.
func WithoutElicitation() Option { return func(c *config) { c.noElicitation = true } }

// WithConfirmationHelp says how a person confirms a call where they cannot be asked inline.
//
// When a call needs the person's confirmation, carries no token and the
// person cannot be asked inline (the client does not support MCP
// elicitation, or WithoutElicitation), the refusal (AXAG_CONFIRMATION_MISSING)
// always says that the token goes in the call's _meta["axag/confirmation"];
// help's text for the call (how this deployment mints one: a UI, an
// endpoint, a command) is added to its suggestion and to its details as
// "how_to_confirm". help must not return secrets: the text reaches the
// agent. An empty text adds nothing.
func WithConfirmationHelp(help func(call *middleware.Call) string) Option {
	return func(c *config) { c.confirmHelp = help }
}

// WithoutHeaderCredentials ignores the X-AXAG-* and Idempotency-Key headers of
// the streamable HTTP transport; credentials are then read from _meta only.
func WithoutHeaderCredentials() Option { return func(c *config) { c.noHeaders = true } }

// WithPropagator sets how a trace context is continued from the call's _meta
// (default: W3C traceparent/tracestate and baggage).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// AddTools registers every tool of the enforcer's manifest on s.
//
// Each gets its name, description, the input schema the parameter gate
// enforces, the MCP annotations and the AXAG safety block in
// _meta["axag/safety"]. Each is bound to its handler with the whole chain
// around it. Every manifest tool needs a handler and every handler a manifest
// tool: AddTools registers nothing and names the mismatches otherwise.
func AddTools(s *mcp.Server, e *axgate.Enforcer, h Handlers, opts ...Option) error {
	var names []string
	for name, handler := range h {
		if handler != nil {
			names = append(names, name)
		}
	}
	if err := e.CheckHandlers(names); err != nil {
		return fmt.Errorf("mcpgate: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		if axgate.Wrapped(h[name]) {
			return fmt.Errorf("mcpgate: handler %q: %w", name, axgate.ErrWrapped)
		}
	}
	tools := e.Tools()
	c := newConfig(opts)
	for _, t := range tools {
		def, _ := Tool(e, t.Name)
		s.AddTool(def, c.handler(e, h[t.Name]))
	}
	return nil
}

// Tool returns the MCP definition of one manifest tool, and whether it
// exists.
func Tool(e *axgate.Enforcer, name string) (*mcp.Tool, bool) {
	t, ok := e.Tool(name)
	a := e.Manifest().Tool(name)
	if !ok || a == nil {
		return nil, false
	}
	mt := a.MCPTool()
	ann := mt.Annotations
	def := &mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			Title:           ann.Title,
			ReadOnlyHint:    ann.ReadOnlyHint,
			DestructiveHint: &ann.DestructiveHint,
			IdempotentHint:  ann.IdempotentHint,
			OpenWorldHint:   &ann.OpenWorldHint,
		},
		Meta: mcp.Meta(mt.Meta),
	}
	// MCP requires an output schema to describe an object; a manifest's
	// output_schema of another type is still enforced by the chain, just
	// not advertised.
	if len(a.OutputSchema) > 0 {
		var probe struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(a.OutputSchema, &probe) == nil && probe.Type == "object" {
			def.OutputSchema = a.OutputSchema
		}
	}
	return def, true
}

// ToolHandler returns an MCP tool handler that runs every call of a manifest
// tool through the enforcer's whole chain, then tool. Use it to register a
// tool by hand (AddTools does it for the whole manifest). The chain is built
// once, here.
func ToolHandler(e *axgate.Enforcer, tool middleware.Invoker, opts ...Option) mcp.ToolHandler {
	c := newConfig(opts)
	return c.handler(e, tool)
}

func (c config) handler(e *axgate.Enforcer, tool middleware.Invoker) mcp.ToolHandler {
	inv := e.Wrap(tool)
	quiet := quietTools(e)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req == nil || req.Params == nil {
			return c.refuse(axerr.New(axerr.CodeInvalidArguments, "the tools/call request has no params"))
		}
		meta := req.Params.Meta
		ctx = c.propagator.Extract(ctx, wire.MetaCarrier(meta))

		p, err := c.principal(ctx, req)
		if err != nil {
			return c.refuse(unauthenticated(err))
		}
		creds, cerr := c.credentials(req)
		if cerr != nil {
			return c.refuse(cerr)
		}
		call := middleware.NewCall(req.Params.Name, req.Params.Arguments, p)
		call.Credentials = creds

		el := c.elicitation(req, !quiet[req.Params.Name])
		if el != nil && el.decided {
			// Back from the page of the call's decision: the state must be
			// this call's, and the decision held for it is what counts (the
			// chain runs again, asking nothing).
			intent := ""
			if a := e.Manifest().Tool(call.Tool); a != nil {
				intent = a.Intent
			}
			if serr := el.checkDecision(ctx, call, intent); serr != nil {
				if errors.Is(serr, ErrElicitationStateInvalid) {
					return c.refuse(decisionStateInvalid())
				}
				return c.refuse(serr)
			}
		} else if el != nil && el.form {
			call.Elicit = func(ctx context.Context, message string) (bool, error) { return el.ask(ctx, call, message) }
		}
		res, err := inv.Invoke(ctx, call)
		if err != nil {
			if ae, ok := axerr.As(err); ok {
				page, perr := el.sendToPage(call, ae)
				if perr != nil {
					return c.refuse(perr)
				}
				if page != nil {
					return page, nil
				}
			}
			switch {
			case el == nil || !el.form:
				err = c.cannotAsk(call, err)
			case el.question != "":
				// The confirmation gate asked and no answer was there yet:
				// ask the person through the client, then the client calls
				// again with the answer.
				return el.inputRequired(), nil
			case el.storeErr != nil:
				return c.refuse(el.storeErr)
			case el.invalid:
				return c.refuse(stateInvalid(err))
			}
			return c.refuse(err)
		}
		return Success(res)
	}
}

// quietTools are the manifest's tools whose chain cannot ask the person
// through the client: every stage of it is one of the standard chain's
// that neither asks (call.Elicit) nor refuses for a missing decision, so
// that the client's capabilities are never read for them (on MCP
// 2026-07-28 they come in each request's _meta, and the SDK decodes them
// anew at each read). A stage of another name, as a custom stage
// (axgate.WithPreExecution) may be, counts as one that may ask.
func quietTools(e *axgate.Enforcer) map[string]bool {
	out := map[string]bool{}
	for _, t := range e.Tools() {
		stages, ok := e.StagesFor(t.Name)
		if !ok {
			continue
		}
		quiet := true
		for _, s := range stages {
			switch s {
			case middleware.StageObserve, middleware.StageIntent, middleware.StageAccess, middleware.StageParams,
				middleware.StageConstraints, middleware.StagePreconditions, middleware.StageRateLimit,
				middleware.StageIdempotency, middleware.StageCommit, middleware.StagePostconditions, middleware.StageTool:
			default:
				quiet = false
			}
		}
		out[t.Name] = quiet
	}
	return out
}

// refuse renders a refusal: a tool result with isError, or, with
// WithJSONRPCParamErrors, a JSON-RPC -32602 error for parameter errors. The
// JSON-RPC error is returned unwrapped, since the SDK keeps the data of a
// *jsonrpc.Error only when the handler returns one as it is.
func (c config) refuse(err error) (*mcp.CallToolResult, error) {
	ae := axerr.From(err)
	if c.rpcParamErrors && ae.Code.IsParameterError() {
		return nil, JSONRPCError(ae)
	}
	return Refusal(ae), nil
}

// cannotAsk adds to a refusal for a missing confirmation, where the person
// cannot be asked inline, how the token can reach the gateway instead.
// Refusals of a token presented (expired, for other arguments, …) carry a
// reason and are left as they are.
func (c config) cannotAsk(call *middleware.Call, err error) error {
	ae, ok := axerr.As(err)
	if !ok || ae.Code != axerr.CodeConfirmationMissing || ae.Details["reason"] != nil || ae.Details["decision_url"] != nil {
		// A refusal that names the page of the call already says how
		// the person decides.
		return err
	}
	why := "the client cannot ask the person inline (it does not support MCP elicitation)"
	cannotCarry := ": use a client that supports MCP elicitation, and the person is asked inline."
	if c.noElicitation {
		// Not asked inline whatever the client: no client helps.
		why = "the person is not asked inline here"
		cannotCarry = "."
	}
	ae.Message = "this call needs the person's confirmation, and " + why
	ae.Suggestion += " The token goes in the call's _meta[\"" + wire.MetaConfirmation + "\"]; a client that cannot set _meta cannot carry it" + cannotCarry
	ae.With("elicitation", false).With("token_meta_key", wire.MetaConfirmation)
	if c.confirmHelp != nil {
		if h := c.confirmHelp(call); h != "" {
			ae.Suggestion += " " + h
			ae.With("how_to_confirm", h)
		}
	}
	return ae
}

// stateInvalid turns the confirmation gate's refusal of an answer whose
// request state was refused ("elicitation_failed") into one that says so.
func stateInvalid(err error) *axerr.Error {
	ae := axerr.From(err)
	if ae.Code != axerr.CodeConfirmationMissing || !errors.Is(err, ErrElicitationStateInvalid) {
		return ae
	}
	ae.Message = "the answer to the confirmation question does not belong to this call"
	ae.Suggestion = "Call the tool again without requestState and inputResponses: the person is asked again about these exact arguments."
	return ae.WithReason(reasons.ElicitationStateInvalid)
}

// decisionStateInvalid refuses a call that came back from a decision page
// with a request state not issued for it.
func decisionStateInvalid() *axerr.Error {
	return axerr.New(axerr.CodeConfirmationMissing, "the request state of this call was not issued for it, expired, or was already used").
		WithSuggestion("Call the tool again without requestState and inputResponses.").
		WithReason(reasons.ElicitationStateInvalid)
}

func unauthenticated(err error) *axerr.Error {
	return axerr.Ensure(err, axerr.CodeUnauthenticated, "the caller is not authenticated").
		WithSuggestion("Connect with valid credentials (a bearer token on the streamable HTTP transport).")
}
