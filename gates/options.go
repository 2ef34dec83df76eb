package gates

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// AccessOptions configure the access gate (axgate.WithAccess). Nil fields
// take the defaults; an empty, non-nil slice (UserArgs: []string{}) names no
// argument, so none is checked.
type AccessOptions struct {
	// UserArgs are the top-level argument names that name a user; under
	// scope: user each one present must name the caller. Default user_id,
	// account_id, owner_id.
	UserArgs []string
	// UserOverrideRoles may act on other users' data under scope: user (an
	// administrator, a support agent). Default none.
	UserOverrideRoles []string
	// TenantArgs are the top-level argument names that name a tenant; under a
	// strict tenant boundary each one present must name the caller's tenant.
	// Default tenant_id, tenant, org_id, organization_id, workspace_id.
	TenantArgs []string
}

// DuplicatePolicy says what the idempotency gate does with a repeat of a
// non-idempotent call that carries no idempotency key.
type DuplicatePolicy int

const (
	// DuplicateWarn lets the repeat run and records a warning in
	// call.Facts.Warnings (for the audit log and the trace). The default.
	DuplicateWarn DuplicatePolicy = iota
	// DuplicateRefuse refuses the repeat with AXGATE_DUPLICATE_CALL (409).
	DuplicateRefuse
	// DuplicateIgnore does not look for repeats (no store round trip).
	DuplicateIgnore
)

// IdempotencyOptions configure the idempotency gate. Zero fields take the
// defaults; negative ones make axgate.New fail.
type IdempotencyOptions struct {
	// Store keeps the records (default memstore.NewIdempotencyStore(0), for
	// one process).
	Store IdempotencyStore
	// Window is how long the outcome of a call made with an idempotency key
	// (its result, or its refusal once the tool ran) is kept and replayed
	// (default 24h).
	Window time.Duration
	// Lease is how long a call with a key counts as in flight: a retry with
	// the same key inside it gets 409 AXGATE_DUPLICATE_IN_FLIGHT. It ends
	// when the outcome is stored, so it only matters when the process dies
	// mid-call, the outcome cannot be stored, or the tool outlives it (its
	// outcome is then not stored, and a retry may run the tool again): make
	// it longer than your slowest tool (default 5m).
	Lease time.Duration
	// Duplicates says what to do with a repeat, without a key, of the same
	// call (principal, tenant, intent, arguments) inside DuplicateWindow
	// (default DuplicateWarn, the zero value).
	Duplicates DuplicatePolicy
	// DuplicateWindow is how long a call without a key is remembered
	// (default 1m).
	DuplicateWindow time.Duration
	// Quota is how many live records made with an idempotency key one
	// caller (principal and tenant) may hold at once, in flight or done,
	// across intents (default 1,000). A call with a new key over it is
	// refused with 429 AXAG_RATE_LIMITED, reason idempotency_quota, and a
	// retry_after of when the caller's oldest record expires; the quota is
	// checked and charged atomically with the claim, and other callers are
	// unaffected. Calls without a key are charged to a quota of their own,
	// as large: a caller's duplicate markers (each lasts DuplicateWindow)
	// over it refuse its next call without a key the same way.
	Quota int
}

// UnboundError is returned when an enforcer would be built with
// preconditions or postconditions that nothing checks.
type UnboundError struct {
	// Kind is "precondition" or "postcondition".
	Kind string
	// Names lists the unbound names, sorted, each with the JSON Pointers of
	// the actions that declare it.
	Names map[string][]string
}

func (e *UnboundError) Error() string {
	names := make([]string, 0, len(e.Names))
	for n := range e.Names {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d %ss are not bound to a check (bind each with a checker or an expression, or allow unbound conditions on purpose):", len(names), e.Kind)
	for _, n := range names {
		fmt.Fprintf(&b, " %q (%s);", n, strings.Join(e.Names[n], ", "))
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Notifier hears of every new approval request, to tell the people who may
// decide it (mail, chat, a queue). It is called synchronously when the gate
// records the request; an error is reported in the refusal's details
// ("approvers_notified": false) and does not change the outcome.
type Notifier interface {
	ApprovalRequested(ctx context.Context, req ApprovalRequest) error
}
