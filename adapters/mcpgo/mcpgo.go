// Package mcpgo enforces an AXAG manifest on the tools of an MCP server built with mcp-go.
//
// The SDK is github.com/mark3labs/mcp-go.
//
// Middleware is a server.ToolHandlerMiddleware: every tools/call runs through
// the enforcer's whole chain before the tool's handler, and a refusal is a
// tool result with isError, a readable text for the model and the AXAG
// envelope as structuredContent, so the model can correct itself. (mcp-go
// cannot answer a tool call with JSON-RPC error data, so there is no -32602
// option here; the official SDK's adapter, adapters/mcpgate, has one.)
//
// The principal comes from the context, where an HTTPContextFunc (such as
// HTTPContextFunc(httpgate.JWTBearer(…))) or ContextWithPrincipal put it,
// never from the arguments. Credentials come from _meta (axag/confirmation,
// axag/approvals, axag/idempotency_key, axag/tenant) or the HTTP headers
// (X-AXAG-Confirmation, X-AXAG-Approval, Idempotency-Key, X-AXAG-Tenant). A
// W3C traceparent in _meta is continued. Confirmation uses the token flow.
package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/middleware"
)

// PrincipalFunc returns the authenticated caller of a tool call, from the
// transport's authentication, never from the arguments. An error refuses the
// call with AXGATE_UNAUTHENTICATED.
type PrincipalFunc func(ctx context.Context, req mcp.CallToolRequest) (middleware.Principal, error)

// Option configures Middleware.
type Option func(*config)

type config struct {
	principal  PrincipalFunc
	noHeaders  bool
	propagator propagation.TextMapPropagator
}

// WithPrincipal replaces how the caller is found (default: ContextPrincipal).
func WithPrincipal(f PrincipalFunc) Option { return func(c *config) { c.principal = f } }

// WithoutHeaderCredentials reads credentials from _meta only.
func WithoutHeaderCredentials() Option { return func(c *config) { c.noHeaders = true } }

// WithPropagator sets how a trace context is continued from _meta (default:
// W3C traceparent/tracestate and baggage).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

type principalKey struct{}

type authResult struct {
	p   middleware.Principal
	err error
}

// ContextWithPrincipal returns ctx carrying the caller, for ContextPrincipal.
func ContextWithPrincipal(ctx context.Context, p middleware.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, authResult{p: p})
}

// HTTPContextFunc authenticates each HTTP request of the streamable HTTP or
// SSE transport (server.WithHTTPContextFunc) with authenticate, such as
// httpgate.JWTBearer, and puts the caller, or why there is none, in the
// context for ContextPrincipal.
func HTTPContextFunc(authenticate func(*http.Request) (middleware.Principal, error)) server.HTTPContextFunc {
	return func(ctx context.Context, r *http.Request) context.Context {
		p, err := authenticate(r)
		return context.WithValue(ctx, principalKey{}, authResult{p: p, err: err})
	}
}

var errNoPrincipal = errors.New("mcpgo: no authenticated caller in the context")

// ContextPrincipal is the default PrincipalFunc: the caller that
// HTTPContextFunc or ContextWithPrincipal put in the context (for stdio, wrap
// the server's context with ContextWithPrincipal of the local user).
func ContextPrincipal(ctx context.Context, _ mcp.CallToolRequest) (middleware.Principal, error) {
	r, ok := ctx.Value(principalKey{}).(authResult)
	if !ok {
		return middleware.Principal{}, errNoPrincipal
	}
	return r.p, r.err
}

// StaticPrincipal always answers p: for a stdio server, which serves the one
// local user who started it.
func StaticPrincipal(p middleware.Principal) PrincipalFunc {
	return func(context.Context, mcp.CallToolRequest) (middleware.Principal, error) { return p, nil }
}

// Middleware returns a tool handler middleware that runs every call through
// e's whole chain, with the wrapped handler as the tool. Install it with
// server.WithToolHandlerMiddleware (or MCPServer.Use). A call of a tool the
// manifest does not declare is refused with AXAG_INTENT_NOT_FOUND.
func Middleware(e *axgate.Enforcer, opts ...Option) server.ToolHandlerMiddleware {
	c := config{
		principal:  ContextPrincipal,
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	for _, o := range opts {
		o(&c)
	}
	inv := e.Wrap(middleware.InvokerFunc(runHandler))
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx = c.propagator.Extract(ctx, wire.MetaCarrier(metaFields(req)))
			p, err := c.principal(ctx, req)
			if err != nil {
				return Refusal(unauthenticated(err)), nil
			}
			creds, cerr := c.credentials(req)
			if cerr != nil {
				return Refusal(cerr), nil
			}
			args, aerr := rawArguments(req)
			if aerr != nil {
				return Refusal(aerr), nil
			}
			call := middleware.NewCall(req.Params.Name, args, p)
			call.Credentials = creds
			run := &handlerRun{next: next, req: req}
			res, err := inv.Invoke(context.WithValue(ctx, handlerKey{}, run), call)
			if err != nil {
				var te *toolError
				if errors.As(err, &te) {
					return te.res, nil // the tool's own error result, for the model
				}
				return Refusal(axerr.From(err)), nil
			}
			if run.res != nil && !call.Facts.Replayed {
				return run.res, nil
			}
			return Success(res.Value), nil
		}
	}
}

type handlerKey struct{}

// handlerRun is the wrapped handler of one call and what it returned.
type handlerRun struct {
	next server.ToolHandlerFunc
	req  mcp.CallToolRequest
	res  *mcp.CallToolResult
}

// toolError carries a handler's own isError result through the chain.
type toolError struct{ res *mcp.CallToolResult }

func (t *toolError) Error() string { return "the tool reported an error" }

// runHandler is the tool of the chain: the wrapped mcp-go handler. Its value
// for the later stages (postconditions, the idempotency record) is the
// handler's structured content when there is one, else its result.
func runHandler(ctx context.Context, _ *middleware.Call) (middleware.Result, error) {
	run, _ := ctx.Value(handlerKey{}).(*handlerRun)
	if run == nil {
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "mcpgo: the handler is missing from the context")
	}
	res, err := run.next(ctx, run.req)
	if err != nil {
		return middleware.Result{}, err
	}
	if res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if res.IsError {
		return middleware.Result{}, &toolError{res}
	}
	run.res = res
	if res.StructuredContent != nil {
		return middleware.Result{Value: res.StructuredContent}, nil
	}
	return middleware.Result{Value: res}, nil
}

func rawArguments(req mcp.CallToolRequest) (json.RawMessage, *axerr.Error) {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	if req.Params.Arguments == nil {
		return nil, nil
	}
	raw, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil, axerr.New(axerr.CodeInvalidArguments, "the arguments cannot be read as JSON").WithCause(err)
	}
	return raw, nil
}

func metaFields(req mcp.CallToolRequest) map[string]any {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.AdditionalFields
}

// credentials reads the call's tokens, idempotency key and claimed tenant
// from _meta, then from the HTTP headers. A credential of the wrong type or
// an unknown axag/ key is refused, never ignored.
func (c config) credentials(req mcp.CallToolRequest) (middleware.Credentials, *axerr.Error) {
	cr, err := wire.FromMeta(metaFields(req))
	if err != nil || c.noHeaders || req.Header == nil {
		return cr, err
	}
	return wire.Merge(cr, wire.FromHeader(req.Header)), nil
}

func unauthenticated(err error) *axerr.Error {
	return axerr.Ensure(err, axerr.CodeUnauthenticated, "the caller is not authenticated").
		WithSuggestion("Connect with valid credentials.")
}

// Refusal renders a refusal as a tool result: isError, a readable text for
// the model, the AXAG envelope as JSON text, and the envelope as
// structuredContent.
func Refusal(e *axerr.Error) *mcp.CallToolResult {
	env := e.Envelope()
	raw, err := json.Marshal(env)
	if err != nil {
		env.Error.Details = map[string]any{"retryable": e.Retryable()}
		raw, _ = json.Marshal(env)
	}
	var structured map[string]any
	_ = json.Unmarshal(raw, &structured)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{mcp.NewTextContent(e.Text()), mcp.NewTextContent(string(raw))},
		StructuredContent: structured,
	}
}

// Success renders a value the chain answered with instead of the handler
// (an idempotent replay): its JSON as text and, when it is an object, as
// structuredContent.
func Success(v any) *mcp.CallToolResult {
	if r, ok := v.(*mcp.CallToolResult); ok && r != nil {
		return r
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return Refusal(axerr.New(axerr.CodeToolFailed, "the tool's result cannot be sent as JSON").WithCause(err))
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(raw))}}
	if len(raw) > 0 && raw[0] == '{' {
		out.StructuredContent = v
	}
	return out
}

// Tool returns the mcp-go definition of a manifest tool: its input schema as
// the parameter gate enforces it, description, annotations and the AXAG
// safety block in _meta["axag/safety"]. Register it with the tool's handler
// (s.AddTool(tool, handler)); Middleware does the enforcing.
func Tool(e *axgate.Enforcer, name string) (mcp.Tool, bool) {
	t, ok := e.Tool(name)
	a := e.Manifest().Tool(name)
	if !ok || a == nil {
		return mcp.Tool{}, false
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return mcp.Tool{}, false
	}
	mt := a.MCPTool()
	ann := mt.Annotations
	tool := mcp.NewToolWithRawSchema(t.Name, t.Description, schema)
	tool.Annotations = mcp.ToolAnnotation{
		Title:           ann.Title,
		ReadOnlyHint:    &ann.ReadOnlyHint,
		DestructiveHint: &ann.DestructiveHint,
		IdempotentHint:  &ann.IdempotentHint,
		OpenWorldHint:   &ann.OpenWorldHint,
	}
	tool.Meta = &mcp.Meta{AdditionalFields: mt.Meta}
	return tool, true
}

// AddTools registers every tool of the manifest on s with its handler; the
// enforcing is Middleware's, installed on the server. Every manifest tool
// needs a handler and every handler a manifest tool.
func AddTools(s *server.MCPServer, e *axgate.Enforcer, handlers map[string]server.ToolHandlerFunc) error {
	var names []string
	for name, handler := range handlers {
		if handler != nil {
			names = append(names, name)
		}
	}
	if err := e.CheckHandlers(names); err != nil {
		return fmt.Errorf("mcpgo: %w", err)
	}
	for _, t := range e.Tools() {
		tool, _ := Tool(e, t.Name)
		s.AddTool(tool, handlers[t.Name])
	}
	return nil
}
