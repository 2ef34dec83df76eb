// Package eino enforces an AXAG manifest on the tool calls of agents built with CloudWeGo Eino.
//
// Eino is github.com/cloudwego/eino.
//
// Middleware is a compose.ToolMiddleware for a ToolsNode (ToolsNodeConfig
// .ToolCallMiddlewares, or a ReAct agent's tools config): every tool call
// runs through the enforcer's whole chain, with the tool itself innermost. A
// refusal becomes the tool's output, the AXAG envelope
// {"error":{code, type, message, details}} as JSON, so the model reads it
// and corrects itself, and the graph goes on; it is never returned as an
// error, which would abort the graph.
//
// The principal comes from the context (ContextWithPrincipal, set by the
// host that runs the graph for an authenticated person), never from the
// arguments. Confirmation and approval tokens, which a host collects from
// its own UI, are given per call with WithCredentials.
package eino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// PrincipalFunc returns the authenticated caller of a tool call. An error
// refuses the call with AXGATE_UNAUTHENTICATED.
type PrincipalFunc func(ctx context.Context, in *compose.ToolInput) (middleware.Principal, error)

// CredentialsFunc returns the tokens and idempotency key the host holds for
// a call (for example a confirmation token its UI minted with
// Enforcer.IssueConfirmation after asking the person).
type CredentialsFunc func(ctx context.Context, in *compose.ToolInput) (middleware.Credentials, error)

// Option configures Middleware.
type Option func(*config)

type config struct {
	principal   PrincipalFunc
	credentials CredentialsFunc
}

// WithPrincipal replaces how the caller is found (default: ContextPrincipal).
func WithPrincipal(f PrincipalFunc) Option { return func(c *config) { c.principal = f } }

// WithCredentials gives each call the credentials the host holds for it.
func WithCredentials(f CredentialsFunc) Option { return func(c *config) { c.credentials = f } }

type principalKey struct{}

// ContextWithPrincipal returns ctx carrying the person the agent acts for;
// run the graph with it.
func ContextWithPrincipal(ctx context.Context, p middleware.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

var errNoPrincipal = errors.New("eino: no authenticated caller in the context")

// ContextPrincipal is the default PrincipalFunc: the principal of
// ContextWithPrincipal.
func ContextPrincipal(ctx context.Context, _ *compose.ToolInput) (middleware.Principal, error) {
	p, ok := ctx.Value(principalKey{}).(middleware.Principal)
	if !ok {
		return middleware.Principal{}, errNoPrincipal
	}
	return p, nil
}

// Middleware returns a tool middleware that runs every tool call through e's whole chain.
//
// It takes every call, invokable or streamable, plain or enhanced. The
// chain is built once, here. For a streamable tool the chain's later stages
// see the stream, not its content: give an action with postconditions or an
// output_schema an invokable tool.
func Middleware(e *axgate.Enforcer, opts ...Option) compose.ToolMiddleware {
	c := config{principal: ContextPrincipal}
	for _, o := range opts {
		o(&c)
	}
	inv := e.Wrap(middleware.InvokerFunc(runEndpoint))
	return compose.ToolMiddleware{
		Invokable: func(next compose.InvokableToolEndpoint) compose.InvokableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.ToolOutput, error) {
				var ran *compose.ToolOutput
				out, refusal := gate(ctx, c, inv, in, func(ctx context.Context) (any, error) {
					o, err := next(ctx, in)
					if err != nil {
						return nil, err
					}
					ran = o
					return decodeResult(o.Result), nil
				})
				switch {
				case refusal != "":
					return &compose.ToolOutput{Result: refusal}, nil
				case ran != nil:
					return ran, nil // the tool's output as it wrote it
				}
				// Answered by the chain without the tool (an idempotent replay).
				return &compose.ToolOutput{Result: encodeResult(out)}, nil
			}
		},
		Streamable: func(next compose.StreamableToolEndpoint) compose.StreamableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.StreamToolOutput, error) {
				out, refusal := gate(ctx, c, inv, in, func(ctx context.Context) (any, error) { return next(ctx, in) })
				if refusal != "" {
					return &compose.StreamToolOutput{Result: schema.StreamReaderFromArray([]string{refusal})}, nil
				}
				return out.(*compose.StreamToolOutput), nil
			}
		},
		EnhancedInvokable: func(next compose.EnhancedInvokableToolEndpoint) compose.EnhancedInvokableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.EnhancedInvokableToolOutput, error) {
				out, refusal := gate(ctx, c, inv, in, func(ctx context.Context) (any, error) {
					o, err := next(ctx, in)
					if err != nil {
						return nil, err
					}
					return o.Result, nil
				})
				if refusal != "" {
					return &compose.EnhancedInvokableToolOutput{Result: textResult(refusal)}, nil
				}
				if r, ok := out.(*schema.ToolResult); ok {
					return &compose.EnhancedInvokableToolOutput{Result: r}, nil
				}
				return &compose.EnhancedInvokableToolOutput{Result: textResult(encodeResult(out))}, nil
			}
		},
		EnhancedStreamable: func(next compose.EnhancedStreamableToolEndpoint) compose.EnhancedStreamableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.EnhancedStreamableToolOutput, error) {
				out, refusal := gate(ctx, c, inv, in, func(ctx context.Context) (any, error) { return next(ctx, in) })
				if refusal != "" {
					return &compose.EnhancedStreamableToolOutput{Result: schema.StreamReaderFromArray([]*schema.ToolResult{textResult(refusal)})}, nil
				}
				return out.(*compose.EnhancedStreamableToolOutput), nil
			}
		},
	}
}

// ToolInfo returns the Eino definition of a manifest tool: its name,
// description and the input schema the parameter gate enforces, with the
// AXAG safety block in Extra["axag/safety"]. Give it to the chat model
// (BindTools) so that the model sees the same rules the gate enforces.
func ToolInfo(e *axgate.Enforcer, name string) (*schema.ToolInfo, error) {
	t, ok := e.Tool(name)
	if !ok {
		return nil, fmt.Errorf("eino: the manifest declares no tool %q", name)
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, err
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("eino: input schema of %s: %w", name, err)
	}
	return &schema.ToolInfo{
		Name:        t.Name,
		Desc:        t.Description,
		Extra:       map[string]any{"axag/safety": t.Safety},
		ParamsOneOf: schema.NewParamsOneOfByJSONSchema(&js),
	}, nil
}

type endpointKey struct{}

// endpoint is the wrapped tool of one call.
type endpoint func(ctx context.Context) (any, error)

// runEndpoint is the innermost step of the chain: the tool itself.
func runEndpoint(ctx context.Context, _ *middleware.Call) (middleware.Result, error) {
	run, ok := ctx.Value(endpointKey{}).(endpoint)
	if !ok {
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "eino: the tool is missing from the context")
	}
	v, err := run(ctx)
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: v}, nil
}

// gate runs one call through the chain; it returns the tool's value, or the
// refusal as the JSON the model reads.
func gate(ctx context.Context, c config, inv middleware.Invoker, in *compose.ToolInput, run endpoint) (any, string) {
	p, err := c.principal(ctx, in)
	if err != nil {
		return nil, Refusal(unauthenticated(err))
	}
	var creds middleware.Credentials
	if c.credentials != nil {
		if creds, err = c.credentials(ctx, in); err != nil {
			return nil, Refusal(axerr.From(err))
		}
	}
	call := middleware.NewCall(in.Name, json.RawMessage(in.Arguments), p)
	call.ID = in.CallID
	call.Credentials = creds
	res, err := inv.Invoke(context.WithValue(ctx, endpointKey{}, run), call)
	if err != nil {
		return nil, Refusal(axerr.From(err))
	}
	return res.Value, ""
}

// decodeResult gives the chain's later stages the tool's output as JSON when
// it is JSON, so postconditions and the output schema see its fields.
func decodeResult(s string) any {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v
	}
	return s
}

func encodeResult(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return Refusal(axerr.New(axerr.CodeToolFailed, "the tool's result cannot be sent as JSON"))
	}
	return string(raw)
}

func textResult(s string) *schema.ToolResult {
	return &schema.ToolResult{Parts: []schema.ToolOutputPart{{Type: schema.ToolPartTypeText, Text: s}}}
}

// Refusal renders a refusal as the tool output the model reads: the AXAG
// envelope as JSON.
func Refusal(e *axerr.Error) string {
	raw, err := json.Marshal(e.Envelope())
	if err != nil {
		env := e.Envelope()
		env.Error.Details = map[string]any{"retryable": e.Retryable()}
		raw, _ = json.Marshal(env)
	}
	return string(raw)
}

func unauthenticated(err error) *axerr.Error {
	return axerr.Ensure(err, axerr.CodeUnauthenticated, "the caller is not authenticated")
}
