package gate

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Default argument names that name a user or a tenant.
var (
	DefaultUserArgs   = []string{"user_id", "account_id", "owner_id"}
	DefaultTenantArgs = []string{"tenant_id", "tenant", "org_id", "organization_id", "workspace_id"}
)

// Access enforces an action's required_roles, the caller's granted scopes,
// scope: user and scope: tenant. Everything it needs per action is computed
// by NewAccess, so the allow path does not allocate.
type Access struct {
	opts  AccessOptions
	rules map[*manifest.Action]*accessRule
}

// accessRule is what the gate checks for one action, precomputed.
type accessRule struct {
	roles []string
	// grants are the scope strings that grant the action: the intent,
	// "<entity>.*" for the entity and every dotted prefix of the intent,
	// "*" and the action type.
	grants []string
	// userArgs, when not nil, are the argument names that must name the
	// caller (scope: user).
	userArgs []string
	// tenantRequired: the caller must have a tenant (scope: tenant).
	tenantRequired bool
	// tenantArgs, when not nil, are the argument names that must name the
	// caller's tenant (a strict boundary).
	tenantArgs []string
	// folds are userArgs and tenantArgs by their case folding: a top-level
	// key that is none of them but folds onto one (TENANT_ID) is refused,
	// since a tool decoding case-insensitively reads it as the argument this
	// gate checks under its exact name only.
	folds *foldedNames
}

// NewAccess prepares the access gate for every action of m.
func NewAccess(m *manifest.Manifest, opts AccessOptions) *Access {
	if opts.UserArgs == nil {
		opts.UserArgs = DefaultUserArgs
	}
	if opts.TenantArgs == nil {
		opts.TenantArgs = DefaultTenantArgs
	}
	checked := m.Checked()
	g := &Access{opts: opts, rules: make(map[*manifest.Action]*accessRule, len(checked))}
	for _, a := range checked {
		g.rules[a] = g.rule(a)
	}
	return g
}

func (g *Access) rule(a *manifest.Action) *accessRule {
	r := &accessRule{roles: slices.Clone(a.RequiredRoles), grants: ScopeGrants(a)}
	if a.Scope == manifest.ScopeUser {
		r.userArgs = g.opts.UserArgs
	}
	// cross_tenant: false fences an action whatever its scope: an argument
	// that names a tenant must name the caller's.
	explicitNoCross := a.CrossTenant != nil && !*a.CrossTenant
	if a.Scope == manifest.ScopeTenant {
		r.tenantRequired = true
		if a.StrictTenant() {
			r.tenantArgs = g.opts.TenantArgs
		}
	} else if explicitNoCross {
		r.tenantArgs = g.opts.TenantArgs
	}
	if r.userArgs != nil || r.tenantArgs != nil {
		r.folds = newFoldedNames(r.userArgs, r.tenantArgs)
	}
	return r
}

// ScopeGrants returns the granted-scope strings any one of which lets a
// caller invoke a: the exact intent ("order.place"), "<prefix>.*" for every
// dotted prefix of the intent ("order.*") and for the action's entity, "*",
// and the action type ("read", "write", "delete", "navigate").
func ScopeGrants(a *manifest.Action) []string {
	out := []string{a.Intent}
	for i := strings.LastIndexByte(a.Intent, '.'); i > 0; i = strings.LastIndexByte(a.Intent[:i], '.') {
		out = append(out, a.Intent[:i]+".*")
	}
	if a.Entity != "" && !slices.Contains(out, a.Entity+".*") {
		out = append(out, a.Entity+".*")
	}
	out = append(out, "*")
	if a.Type != "" {
		out = append(out, string(a.Type))
	}
	return out
}

// Stage returns the gate as a chain stage.
func (g *Access) Stage() middleware.Stage {
	return checkStage(StageAccess, nil, func(_ context.Context, call *middleware.Call) error { return g.Check(call) })
}

// Check applies the access checks in order and returns the first refusal, or nil.
//
// The order is roles, granted scopes, a claimed tenant, scope: tenant, scope:
// user. It runs before the parameter gate, so it reads arguments only when
// the action's scope needs them, and a malformed argument document is refused
// here with the decoder's own error.
func (g *Access) Check(call *middleware.Call) error {
	a := call.Action
	if a == nil {
		return unresolvedAction(StageAccess)
	}
	r := g.rules[a]
	if r == nil {
		// An action from another manifest (set by the transport): compute
		// its rule now rather than let it through unchecked.
		r = g.rule(a)
	}
	p := &call.Principal

	if len(r.roles) > 0 && !p.HasRole(r.roles...) {
		return axerr.Newf(axerr.CodeRoleInsufficient, "%s requires one of the roles %s", a.Intent, strings.Join(r.roles, ", ")).
			WithIntent(a.Intent).
			WithSuggestion("Ask a user who holds one of the required roles to perform this action.").
			WithReason(reasons.RoleMissing).
			With("required_roles", slices.Clone(r.roles))
	}

	// A nil Scopes means the credential carried no scope claim: nothing to
	// narrow. An empty, non-nil list grants nothing.
	if p.Scopes != nil && !scopeGranted(p.Scopes, r.grants) {
		return axerr.Newf(axerr.CodeScopeViolation, "the caller's granted scopes do not include %s", a.Intent).
			WithIntent(a.Intent).
			WithSuggestion("Obtain a credential granting one of the scopes listed in granting_scopes.").
			WithReason(reasons.ScopeNotGranted).
			With("granting_scopes", slices.Clone(r.grants))
	}

	// A request that claims a tenant must claim the caller's, whatever the
	// action's scope: a mismatch is a cross-tenant attempt. Neither value is
	// echoed; the claim may name another tenant.
	if call.Credentials.ClaimedTenant != "" && call.Credentials.ClaimedTenant != p.Tenant {
		return tenantRefusal(a, reasons.ClaimedTenantMismatch, "", "the tenant the request claims is not the caller's tenant")
	}
	if r.tenantRequired && p.Tenant == "" {
		return tenantRefusal(a, reasons.NoTenant, "", a.Intent+" is tenant-scoped and the caller has no tenant")
	}

	if len(r.tenantArgs) > 0 || len(r.userArgs) > 0 {
		args, err := call.Args()
		if err != nil {
			return err
		}
		if keys, names := r.folds.strays(args); len(keys) > 0 {
			vs := make([]axerr.Violation, len(keys))
			for i, k := range keys {
				vs[i] = foldViolation("/"+jsonx.EscapePointer(k), names[i])
			}
			return ambiguousKeyError(a.Intent, vs, 0).With("argument", vs[0].Path)
		}
		if name, ok := firstForeignArg(args, r.tenantArgs, p.Tenant); !ok {
			return tenantRefusal(a, reasons.ArgumentOtherTenant, "/"+name, "argument "+name+" names a tenant other than the caller's")
		}
		if len(r.userArgs) > 0 && !p.HasRole(g.opts.UserOverrideRoles...) {
			if name, ok := firstForeignArg(args, r.userArgs, p.ID); !ok {
				reason, msg := reasons.ArgumentOtherUser, "argument "+name+" names a user other than the caller"
				if p.ID == "" {
					reason, msg = reasons.NoCallerID, "argument "+name+" names a user and the caller has no identity to match it"
				}
				return axerr.New(axerr.CodeScopeViolation, msg).
					WithIntent(a.Intent).
					WithSuggestion("Act only on the caller's own data: set "+name+" to the caller's id or leave it out.").
					WithReason(reason).
					With("argument", "/"+name)
			}
		}
	}
	return nil
}

func tenantRefusal(a *manifest.Action, reason axerr.Reason, argPath, msg string) *axerr.Error {
	e := axerr.New(axerr.CodeTenantBoundary, msg).WithIntent(a.Intent).WithReason(reason)
	if argPath != "" {
		e.With("argument", argPath)
		e.Suggestion = "Act only within the caller's tenant: set " + argPath[1:] + " to the caller's tenant or leave it out."
	}
	return e
}

// scopeGranted reports whether any of the caller's scopes is one of the grants.
func scopeGranted(scopes, grants []string) bool {
	for _, s := range scopes {
		if slices.Contains(grants, s) {
			return true
		}
	}
	return false
}

// firstForeignArg returns the first of names present in args whose value does
// not name want, and false; or "", true when all present ones do. An empty
// want matches nothing: a caller without an identity cannot be shown to be
// the one named. A number names the identity whose text is the number's exact
// decimal text (see argNamesID); any other type names nobody.
func firstForeignArg(args map[string]any, names []string, want string) (string, bool) {
	for _, n := range names {
		v, ok := args[n]
		if !ok {
			continue
		}
		if want == "" || !argNamesID(v, want) {
			return n, false
		}
	}
	return "", true
}

// argNamesID reports whether an argument value names the id want. Text is
// compared, never floats: a number names want only when want is the
// canonical decimal text of the number's exact value ("42", "-7", "0.5"; not
// "042" or "4.2e1"). The decoder admits only numbers a double holds exactly
// (I-JSON), so the double's text is the text of the caller's value; a double
// of magnitude 2^53 or more names nobody, because from there on one double is
// the image of several integers (1234567890123456768 and …800 are one
// double), and the tool may act on another of them than the gate checked.
func argNamesID(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case float64:
		if math.IsNaN(v) || math.Abs(v) >= 1<<53 {
			return false
		}
		// Compare without allocating in the common case: an integer id.
		if v == math.Trunc(v) {
			var buf [24]byte
			return string(strconv.AppendInt(buf[:0], int64(v), 10)) == want
		}
		var buf [32]byte
		return string(strconv.AppendFloat(buf[:0], v, 'f', -1, 64)) == want
	}
	return false
}

// unresolvedAction is the refusal of a gate that runs before the intent is
// resolved: a chain assembled in the wrong order.
func unresolvedAction(stage string) *axerr.Error {
	return axerr.Newf(axerr.CodeInternal, "the %s gate ran before the tool was resolved to a manifest action", stage)
}
