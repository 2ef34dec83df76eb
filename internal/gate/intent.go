package gate

import (
	"context"
	"sort"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Intent resolves call.Tool to its manifest action.
//
// Unless the transport already set call.Action, it looks the tool up, and
// refuses a tool the manifest does not declare with AXAG_INTENT_NOT_FOUND. It also gives the call the enforcer's argument
// limits for every limit the call does not set itself.
//
// A transport may also set call.Action to the action of one of the
// manifest's Resources or Prompts (manifest.Manifest.Checked): such a call
// passes the same gates, under its intent.
func Intent(m *manifest.Manifest, limits middleware.Limits) middleware.Stage {
	entries := map[*manifest.Action]bool{}
	for _, a := range m.Checked()[len(m.Actions):] {
		entries[a] = true
	}
	return middleware.Stage{Name: StageIntent, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		call.Limits = call.Limits.Or(limits)
		if call.Action == nil {
			a := m.Tool(call.Tool)
			if a == nil {
				return middleware.Result{}, IntentNotFound(m, call.Tool)
			}
			call.Action = a
		} else if m.Tool(call.Action.ToolName()) != call.Action && !entries[call.Action] {
			// A transport resolved the action from another manifest (or
			// another load of this one): the gates hold no compiled data
			// for it, so it must not pass.
			return middleware.Result{}, axerr.Newf(axerr.CodeInternal, "the call's action %q is not from the enforced manifest", call.Action.Intent).
				WithIntent(call.Action.Intent)
		}
		return next.Invoke(ctx, call)
	}}
}

// IntentNotFound is the refusal for a tool the manifest does not declare. Its
// suggestion lists the tools there are.
func IntentNotFound(m *manifest.Manifest, tool string) *axerr.Error {
	names := make([]string, 0, len(m.Actions))
	for _, a := range m.Actions {
		names = append(names, a.ToolName())
	}
	sort.Strings(names)
	e := axerr.Newf(axerr.CodeIntentNotFound, "no tool named %q", tool).With("tool", tool)
	if len(names) > 0 {
		e.Suggestion = "Call one of: " + strings.Join(names, ", ")
	}
	return e
}
