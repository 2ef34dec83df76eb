package axgate

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// ShadowOptions configure shadow mode (WithShadow).
type ShadowOptions struct {
	// Intents are the actions in shadow mode; empty means every action of
	// the manifest. New fails on an intent the manifest does not declare.
	Intents []string
	// Force allows shadow mode for actions whose risk_level is critical,
	// which New refuses otherwise.
	Force bool
	// ForceIntents allows shadow mode for these critical actions only, as
	// Force does for all (a configuration's shadow-force, per intent). New
	// fails on an intent the manifest does not declare or that is not in
	// shadow mode.
	ForceIntents []string
	// Logger receives one Warn record "axgate shadow refusal" per refusal
	// shadow mode lets pass (slog.Default() when nil).
	Logger *slog.Logger
}

// ShadowMessage is the message of the log record of each refusal shadow mode lets pass.
const ShadowMessage = "axgate shadow refusal"

// WithShadow runs the chosen actions in shadow mode: every gate checks, nothing refuses.
//
// The chain runs as usual, but a refusal by a gate is logged
// (ShadowOptions.Logger), kept on the call (middleware.Facts.ShadowRefusals),
// recorded on the span and in the audit record (axag.decision
// "shadow_deny", with the first refusal's code and gate, and one
// "axag.gate" event with outcome "shadow_deny" per refusal) and counted
// (axag.decisions with decision "shadow_deny"), and the call goes on to the
// tool. A postcondition's refusal lets the tool's result through.
//
// The confirmation and approval gates look without recording in shadow
// mode, as for Enforcer.Check: tokens are verified but never spent, no
// person is asked (no elicitation) and no approval request is opened, so
// no one is notified.
//
// Refusals that protect the process itself still refuse: a tool the
// manifest does not declare (AXAG_INTENT_NOT_FOUND), arguments that are not
// an I-JSON object within the limits (AXGATE_INVALID_ARGUMENTS,
// AXGATE_PAYLOAD_TOO_LARGE) and faults of the chain (AXGATE_INTERNAL).
// Enforcer.Check is not in shadow mode: it reports what enforcement would
// decide.
//
// New refuses shadow mode for an action whose risk_level is critical
// unless ShadowOptions.Force is set. A later WithShadow replaces an earlier
// one.
func WithShadow(o ShadowOptions) Option {
	o.Intents = slices.Clone(o.Intents)
	o.ForceIntents = slices.Clone(o.ForceIntents)
	return func(c *config) { c.shadow = &o }
}

// shadowActions returns the actions in shadow mode (nil: none), or why the
// options cannot be honoured.
func (e *Enforcer) shadowActions() (map[*manifest.Action]bool, error) {
	o := e.cfg.shadow
	if o == nil {
		return nil, nil
	}
	var actions []*manifest.Action
	if len(o.Intents) == 0 {
		actions = e.m.Actions
	}
	var unknown []string
	for _, intent := range o.Intents {
		a := e.m.Action(intent)
		if a == nil {
			unknown = append(unknown, intent)
			continue
		}
		actions = append(actions, a)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("shadow mode: the manifest declares no action %s", strings.Join(unknown, ", "))
	}
	var critical []string
	set := make(map[*manifest.Action]bool, len(actions))
	for _, a := range actions {
		set[a] = true
		if a.RiskLevel == manifest.RiskCritical && !slices.Contains(o.ForceIntents, a.Intent) {
			critical = append(critical, a.Intent)
		}
	}
	for _, intent := range o.ForceIntents {
		if a := e.m.Action(intent); a == nil || !set[a] {
			return nil, fmt.Errorf("shadow mode: ForceIntents names %s, not in shadow mode", intent)
		}
	}
	if len(critical) > 0 && !o.Force {
		return nil, fmt.Errorf("shadow mode: critical actions %s need ShadowOptions.Force", strings.Join(critical, ", "))
	}
	return set, nil
}

// shadowStages returns stages with every gate but the intent gate and the
// commit stage wrapped for shadow mode, for the calls of the actions in
// set.
func (e *Enforcer) shadowStages(stages []middleware.Stage, set map[*manifest.Action]bool) []middleware.Stage {
	logger := e.cfg.shadow.Logger
	if logger == nil {
		logger = slog.Default()
	}
	out := make([]middleware.Stage, len(stages))
	for i, s := range stages {
		out[i] = s
		switch s.Name {
		case middleware.StageIntent, middleware.StageCommit, middleware.StageObserve:
			continue
		case middleware.StageConfirmation, middleware.StageApproval:
			s.Interceptor = lookOnly(s.Interceptor, set)
		}
		out[i].Interceptor = shadowed(s.Name, s.Interceptor, set, logger)
	}
	return out
}

// lookOnly runs a token gate as a check for the calls of the actions in
// set: it verifies tokens without spending them, asks no one and opens no
// approval request. The rest of the chain runs as usual.
func lookOnly(gate middleware.Interceptor, set map[*manifest.Action]bool) middleware.Interceptor {
	return func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if call.CheckOnly() || !set[call.Action] {
			return gate(ctx, call, next)
		}
		call.SetCheckOnly(true)
		defer call.SetCheckOnly(false)
		return gate(ctx, call, middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
			call.SetCheckOnly(false)
			defer call.SetCheckOnly(true)
			return next.Invoke(ctx, call)
		}))
	}
}

// shadowed lets a gate's refusal pass for the calls of the actions in set:
// it is logged and kept on the call, and the rest of the chain runs (or,
// when the gate refused after the rest ran, its result is returned).
func shadowed(name string, gate middleware.Interceptor, set map[*manifest.Action]bool, logger *slog.Logger) middleware.Interceptor {
	return func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if call.CheckOnly() || !set[call.Action] {
			return gate(ctx, call, next)
		}
		var (
			ran     bool
			nextRes middleware.Result
			nextErr error
		)
		res, err := gate(ctx, call, middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
			ran = true
			nextRes, nextErr = next.Invoke(ctx, call)
			return nextRes, nextErr
		}))
		if err == nil || (ran && nextErr != nil) {
			return res, err
		}
		ae, ok := axerr.As(err)
		if !ok || !shadowable(ae.Code) {
			return res, err
		}
		if ae.Gate == "" {
			ae = ae.Clone()
			ae.Gate = name
		}
		call.Facts.ShadowRefusals = append(call.Facts.ShadowRefusals, ae)
		logShadow(ctx, logger, call, ae)
		if ran {
			return nextRes, nil
		}
		return next.Invoke(ctx, call)
	}
}

// shadowable reports whether shadow mode lets a refusal with code pass:
// every one but those that protect the process (see WithShadow).
func shadowable(code axerr.Code) bool {
	switch code {
	case axerr.CodeIntentNotFound, axerr.CodeInvalidArguments, axerr.CodePayloadTooLarge, axerr.CodeInternal:
		return false
	}
	return true
}

// logShadow writes the log record of a refusal shadow mode let pass: what
// an agent would have been told, without argument values (the message may
// quote one, so only the code, reason and violation paths are logged).
func logShadow(ctx context.Context, logger *slog.Logger, call *middleware.Call, ae *axerr.Error) {
	if !logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	attrs := []slog.Attr{
		slog.String("intent", call.Intent()),
		slog.String("tool", call.Tool),
		slog.String("principal", call.Principal.ID),
		slog.String("tenant", call.Principal.Tenant),
		slog.String("decision", middleware.DecisionShadowDeny),
		slog.String("code", string(ae.Code)),
		slog.String("gate", ae.Gate),
	}
	if r, ok := ae.Details["reason"].(string); ok && r != "" {
		attrs = append(attrs, slog.String("reason", r))
	}
	if len(ae.Violations) > 0 {
		paths := make([]string, len(ae.Violations))
		for i, v := range ae.Violations {
			paths[i] = v.Path
		}
		attrs = append(attrs, slog.Any("paths", paths))
	}
	logger.LogAttrs(ctx, slog.LevelWarn, ShadowMessage, attrs...)
}
