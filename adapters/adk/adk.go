// Package adk enforces an AXAG manifest on the tool calls of agents built with ADK for Go.
//
// ADK is Google's Agent Development Kit for Go (google.golang.org/adk/v2).
//
// Gate.BeforeTool is a BeforeToolCallback, and Gate.Plugin an ADK plugin
// that installs it for every agent a runner runs. For each call of a tool
// the manifest declares, it runs the enforcer's whole chain with the tool's
// own Run as the innermost step, and hands ADK the result (so ADK does not
// run the tool a second time; after-tool callbacks still run). A refusal
// becomes the tool's result, the AXAG envelope {"error":{code, type,
// message, details}}, which the model reads and corrects itself from.
//
// A call that needs the person's confirmation uses ADK's tool confirmation
// (Human-in-the-Loop): the gate's rendered confirmation message becomes the
// confirmation request's hint; when the person approves, ADK calls the tool
// again and the chain lets it through, recording an elicited confirmation;
// a rejection is refused with AXAG_CONFIRMATION_MISSING.
//
// The principal is the session's user (or what WithPrincipal returns),
// never taken from the arguments.
package adk

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/tool"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// PluginName is the name of the plugin Gate.Plugin returns.
const PluginName = "axgate"

// PrincipalFunc returns the authenticated caller of a tool call: the person
// the agent acts for, as the host authenticated them. An error refuses the
// call with AXGATE_UNAUTHENTICATED.
type PrincipalFunc func(ctx agent.Context) (middleware.Principal, error)

// CredentialsFunc returns the tokens and idempotency key a call presents,
// for hosts that collect signed confirmation or approval tokens themselves.
type CredentialsFunc func(ctx agent.Context, toolName string, args map[string]any) (middleware.Credentials, error)

// Option configures a Gate.
type Option func(*config)

type config struct {
	principal   PrincipalFunc
	credentials CredentialsFunc
	unmanaged   map[string]bool
	noConfirm   bool
}

// WithPrincipal replaces how the caller is found. The default,
// SessionUser, is the session's user id with no tenant or roles: give a
// PrincipalFunc that looks the user up when the manifest has roles, scopes
// or tenants.
func WithPrincipal(f PrincipalFunc) Option { return func(c *config) { c.principal = f } }

// WithCredentials gives the calls credentials (signed confirmation and
// approval tokens, an idempotency key) the host holds for them.
func WithCredentials(f CredentialsFunc) Option { return func(c *config) { c.credentials = f } }

// WithUnmanagedTools lets the named tools through unchecked: ADK's own
// tools, such as transfer_to_agent, which no manifest declares. Every other
// tool the manifest does not declare is refused with AXAG_INTENT_NOT_FOUND.
func WithUnmanagedTools(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			c.unmanaged[n] = true
		}
	}
}

// WithoutToolConfirmation never asks through ADK's tool confirmation: a
// call that needs confirmation then needs a signed token (WithCredentials).
func WithoutToolConfirmation() Option { return func(c *config) { c.noConfirm = true } }

var errNoUser = errors.New("adk: the session has no user")

// SessionUser is the default PrincipalFunc: the session's user id.
func SessionUser(ctx agent.Context) (middleware.Principal, error) {
	if ctx.UserID() == "" {
		return middleware.Principal{}, errNoUser
	}
	return middleware.Principal{ID: ctx.UserID()}, nil
}

// Gate runs the enforcer's chain around an ADK agent's tool calls.
type Gate struct {
	inv middleware.Invoker
	cfg config
}

// New returns a Gate for the enforcer. The chain is built once, here.
func New(e *axgate.Enforcer, opts ...Option) *Gate {
	g := &Gate{cfg: config{principal: SessionUser, unmanaged: map[string]bool{}}}
	for _, o := range opts {
		o(&g.cfg)
	}
	g.inv = e.Wrap(middleware.InvokerFunc(runTool))
	return g
}

// Plugin returns an ADK plugin that runs BeforeTool for every tool call of
// every agent of a runner (runner.Config.PluginConfig).
func (g *Gate) Plugin() (*plugin.Plugin, error) {
	return plugin.New(plugin.Config{Name: PluginName, BeforeToolCallback: g.BeforeTool})
}

// runnable is what ADK calls tools through.
type runnable interface {
	Run(ctx agent.Context, args any) (map[string]any, error)
}

// ErrConfirmationRequested is the cause of the confirmation refusal of a
// call whose confirmation was just asked through ADK's tool confirmation.
var ErrConfirmationRequested = errors.New("adk: the confirmation request is on its way to the person")

// BeforeTool is an llmagent.BeforeToolCallback. It always answers with a
// result (the tool's, or the refusal), so ADK never runs a managed tool on
// its own.
func (g *Gate) BeforeTool(ctx agent.Context, t tool.Tool, args map[string]any) (map[string]any, error) {
	if g.cfg.unmanaged[t.Name()] {
		return nil, nil
	}
	rt, ok := t.(runnable)
	if !ok {
		return Refusal(axerr.Newf(axerr.CodeInternal, "tool %q cannot be run through axgate", t.Name())), nil
	}
	p, err := g.cfg.principal(ctx)
	if err != nil {
		return Refusal(unauthenticated(err)), nil
	}
	var creds middleware.Credentials
	if g.cfg.credentials != nil {
		if creds, err = g.cfg.credentials(ctx, t.Name(), args); err != nil {
			return Refusal(axerr.From(err)), nil
		}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return Refusal(axerr.New(axerr.CodeInvalidArguments, "the arguments cannot be read as JSON").WithCause(err)), nil
	}
	call := middleware.NewCall(t.Name(), raw, p)
	call.ID = ctx.FunctionCallID()
	call.Credentials = creds
	if !g.cfg.noConfirm {
		call.Elicit = func(_ context.Context, message string) (bool, error) {
			if c := ctx.ToolConfirmation(); c != nil {
				return c.Confirmed, nil // the person answered the request
			}
			digest, _ := call.ArgsSHA256()
			payload := map[string]any{"intent": call.Intent(), "args_sha256": digest}
			if err := ctx.RequestConfirmation(message, payload); err != nil {
				return false, err
			}
			// The turn pauses for the person: no model summary of the refusal.
			ctx.Actions().SkipSummarization = true
			return false, ErrConfirmationRequested
		}
	}
	res, err := g.inv.Invoke(toolContext{Context: ctx, rt: rt, args: args}, call)
	if err != nil {
		ae := axerr.From(err)
		if errors.Is(err, ErrConfirmationRequested) {
			ae.With("confirmation_requested", true)
		}
		return Refusal(ae), nil
	}
	return resultMap(res.Value), nil
}

// toolContext carries the ADK context and the tool through the chain to
// runTool.
type toolContext struct {
	agent.Context
	rt   runnable
	args map[string]any
}

type toolKey struct{}

func (c toolContext) Value(key any) any {
	if key == (toolKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// chainContext is the ADK context seen through the chain's context, so that
// the tool runs in the chain's span and deadline.
type chainContext struct {
	agent.Context
	ctx context.Context
}

func (c chainContext) Deadline() (time.Time, bool) { return c.ctx.Deadline() }
func (c chainContext) Done() <-chan struct{}       { return c.ctx.Done() }
func (c chainContext) Err() error                  { return c.ctx.Err() }
func (c chainContext) Value(key any) any           { return c.ctx.Value(key) }

// runTool is the innermost step of the chain: the ADK tool itself.
func runTool(ctx context.Context, _ *middleware.Call) (middleware.Result, error) {
	tc, ok := ctx.Value(toolKey{}).(toolContext)
	if !ok {
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "adk: the tool is missing from the context")
	}
	out, err := tc.rt.Run(chainContext{Context: tc.Context, ctx: ctx}, tc.args)
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: out}, nil
}

// resultMap returns the value as the map ADK expects, never nil: a nil
// result would let ADK run the tool again.
func resultMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		if m != nil {
			return m
		}
		return map[string]any{}
	case nil:
		return map[string]any{}
	}
	raw, err := json.Marshal(v)
	if err == nil {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil && m != nil {
			return m
		}
		var val any
		if json.Unmarshal(raw, &val) == nil {
			return map[string]any{"result": val}
		}
	}
	return Refusal(axerr.New(axerr.CodeToolFailed, "the tool's result cannot be sent as JSON"))
}

// Refusal renders a refusal as a tool result: the AXAG envelope
// {"error":{"code","type","message","details"}}.
func Refusal(e *axerr.Error) map[string]any {
	raw, err := json.Marshal(e.Envelope())
	if err != nil {
		env := e.Envelope()
		env.Error.Details = map[string]any{"retryable": e.Retryable()}
		raw, _ = json.Marshal(env)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func unauthenticated(err error) *axerr.Error {
	return axerr.Ensure(err, axerr.CodeUnauthenticated, "the caller is not authenticated")
}
