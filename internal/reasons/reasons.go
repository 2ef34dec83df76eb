// Package reasons holds the details.reason values of axgate's own refusals.
//
// They are wire values an agent acts on (listed in the README); Go code of
// axgate names them here, and a user's code compares details.reason with the
// string.
package reasons

import axerr "github.com/axgate/axgate/errors"

// Reasons of refusals of the arguments themselves, before any gate looks at
// them (the one view of the arguments: RFC 7493 I-JSON).
const (
	// NumberNotInteroperable: a number a double cannot hold exactly
	// (an integer above 2^53 in magnitude, a decimal that rounds).
	NumberNotInteroperable axerr.Reason = "number_not_interoperable"
	// AmbiguousKeys: two keys of one object are equal under Unicode
	// simple case folding (tenant_id and TENANT_ID).
	AmbiguousKeys axerr.Reason = "ambiguous_keys"
	// TooManyMembers: an object has more members than the limit.
	TooManyMembers axerr.Reason = "too_many_members"
	// TooManyItems: an array has more items than the limit.
	TooManyItems axerr.Reason = "too_many_items"
	// InvalidString: a string escapes a UTF-16 surrogate that is not
	// half of a pair ("\ud800"), which decoders replace, refuse or keep.
	InvalidString axerr.Reason = "invalid_string"
	// UnsupportedMediaType: a body on a gated route is not JSON.
	UnsupportedMediaType axerr.Reason = "unsupported_media_type"
	// MethodNotAllowed: the path is bound to an action, the method is
	// not.
	MethodNotAllowed axerr.Reason = "method_not_allowed"
)

// Reasons of refusals by shared state that is bounded per caller.
const (
	// ApprovalQuota: the requester has as many pending approval
	// requests as allowed.
	ApprovalQuota axerr.Reason = "approval_quota"
	// IdempotencyQuota: the caller holds as many live idempotency
	// records as allowed.
	IdempotencyQuota axerr.Reason = "idempotency_quota"
	// AlreadyDecided: this approver has decided this request already.
	AlreadyDecided axerr.Reason = "already_decided"
	// ApprovalDenied: a denial of this call vetoes it for the
	// approval tokens' maximum lifetime.
	ApprovalDenied axerr.Reason = "approval_denied"
	// StoreBusy: the shared store is healthy but no connection was
	// free in time.
	StoreBusy axerr.Reason = "store_busy"
)

// Reasons of the access stage (roles, granted scopes, user scope, tenant):
// the checks share one stage, and the reason says which one refused.
const (
	// RoleMissing: the caller holds none of the action's roles
	// (AXAG_ROLE_INSUFFICIENT).
	RoleMissing axerr.Reason = "role_missing"
	// ScopeNotGranted: the caller's granted scopes include none that
	// grants the action (AXAG_SCOPE_VIOLATION).
	ScopeNotGranted axerr.Reason = "scope_not_granted"
	// ArgumentOtherUser: a user argument names someone other than the
	// caller (AXAG_SCOPE_VIOLATION).
	ArgumentOtherUser axerr.Reason = "argument_names_other_user"
	// NoCallerID: a user argument is set and the caller has no id to
	// match it with (AXAG_SCOPE_VIOLATION).
	NoCallerID axerr.Reason = "no_caller_id"
	// NoTenant: the action is tenant-scoped and the caller has no
	// tenant (AXAG_TENANT_BOUNDARY).
	NoTenant axerr.Reason = "no_tenant"
	// ClaimedTenantMismatch: the request claims a tenant that is not
	// the caller's (AXAG_TENANT_BOUNDARY).
	ClaimedTenantMismatch axerr.Reason = "claimed_tenant_mismatch"
	// ArgumentOtherTenant: a tenant argument names a tenant other than
	// the caller's (AXAG_TENANT_BOUNDARY).
	ArgumentOtherTenant axerr.Reason = "argument_names_other_tenant"
)

// Reasons of the constraint, precondition and postcondition stages: the
// expression did not hold, or could not be evaluated (fail closed).
const (
	// ConstraintFailed: a relational constraint does not hold on the
	// arguments (AXAG_PRECONDITION_FAILED).
	ConstraintFailed axerr.Reason = "constraint_failed"
	// ConstraintNotEvaluable: a constraint could not be evaluated on
	// the arguments, for example a field it reads is absent
	// (AXAG_PRECONDITION_FAILED).
	ConstraintNotEvaluable axerr.Reason = "constraint_not_evaluable"
	// PreconditionFailed: a precondition does not hold
	// (AXAG_PRECONDITION_FAILED).
	PreconditionFailed axerr.Reason = "precondition_failed"
	// PreconditionNotEvaluable: a precondition could not be checked
	// (AXAG_PRECONDITION_FAILED).
	PreconditionNotEvaluable axerr.Reason = "precondition_not_evaluable"
	// OutputSchema: the tool's result does not match the action's
	// output_schema (AXGATE_POSTCONDITION_FAILED).
	OutputSchema axerr.Reason = "output_schema"
	// ResultNotJSON: the tool's result cannot be rendered as JSON
	// (AXGATE_POSTCONDITION_FAILED).
	ResultNotJSON axerr.Reason = "result_not_json"
	// PostconditionFailed: a postcondition does not hold on the
	// result (AXGATE_POSTCONDITION_FAILED).
	PostconditionFailed axerr.Reason = "postcondition_failed"
	// PostconditionNotEvaluable: a postcondition could not be checked
	// on the result (AXGATE_POSTCONDITION_FAILED).
	PostconditionNotEvaluable axerr.Reason = "postcondition_not_evaluable"
)

// Reasons of the rate-limit stage (AXAG_RATE_LIMITED).
const (
	// RateLimit: the action's rate limit is reached.
	RateLimit axerr.Reason = "rate_limit"
	// Cooldown: the action's cooldown since its last call has not
	// passed.
	Cooldown axerr.Reason = "cooldown"
)

// Reasons of the confirmation gate besides those of a refused token
// (AXAG_CONFIRMATION_MISSING). A confirmation refused for its token carries
// the token's reason (token.Reason).
const (
	// Declined: the person asked (through MCP elicitation, or on the
	// confirmation page of the call) declined.
	Declined axerr.Reason = "declined"
	// DecisionUsed: the decision held for the call (its confirmation or
	// approval request, decided on a page) was used by a call that ran;
	// the same call needs a new decision (also AXAG_APPROVAL_MISSING).
	DecisionUsed axerr.Reason = "decision_used"
	// ElicitationFailed: the person could not be asked.
	ElicitationFailed axerr.Reason = "elicitation_failed"
	// ElicitationStateInvalid: the answer to the confirmation question
	// was not issued for this call, expired or was already used (mcpgate).
	ElicitationStateInvalid axerr.Reason = "elicitation_state_invalid"
)

// Reasons of the approval gate and the approval workflow
// (AXAG_APPROVAL_INVALID unless noted). Approval tokens refused one by one
// are listed in details.rejected_tokens with their token.Reason.
const (
	// TooManyTokens: more approval tokens were presented than are
	// checked.
	TooManyTokens axerr.Reason = "too_many_tokens"
	// SelfApproval: the requester approved (or tried to decide) their
	// own call.
	SelfApproval axerr.Reason = "self_approval"
	// RoleNotAllowed: the approver holds none of the action's
	// approval roles.
	RoleNotAllowed axerr.Reason = "role_not_allowed"
	// InvalidTransition: the approval request is no longer in a state
	// that allows the operation (decided, cancelled, expired).
	InvalidTransition axerr.Reason = "invalid_transition"
	// RequestNotFound: there is no such approval request (or the
	// caller may not learn of it).
	RequestNotFound axerr.Reason = "request_not_found"
	// NotAllowed: the caller is neither the requester nor an approver
	// of the request.
	NotAllowed axerr.Reason = "not_allowed"
	// NotRequester: only the requester may cancel the request.
	NotRequester axerr.Reason = "not_requester"
	// InvalidCursor: the inbox cursor was not handed out by this inbox
	// (AXGATE_INVALID_ARGUMENTS).
	InvalidCursor axerr.Reason = "invalid_cursor"
	// InvalidLimit: the inbox page size is out of range
	// (AXGATE_INVALID_ARGUMENTS, httpgate).
	InvalidLimit axerr.Reason = "invalid_limit"
)

// Reasons of authentication at a transport (AXGATE_UNAUTHENTICATED). A bearer
// token that is present and refused carries the token's reason
// (token.Reason: expired, bad_signature, …).
const (
	// MissingToken: the request has no bearer token.
	MissingToken axerr.Reason = "missing_token"
	// NoAuthenticator: the server has no authentication configured
	// and refuses every call.
	NoAuthenticator axerr.Reason = "no_authenticator"
	// BadClaim: a claim of the bearer token has the wrong JSON type.
	BadClaim axerr.Reason = "bad_claim"
)

// Reasons of a gateway in front of an upstream tool server (the MCP gateway).
const (
	// UpstreamChanged: the upstream's definition of the tool no longer
	// matches the manifest's upstream_sha256 pin; the tool stays disabled
	// until the pin is updated after review (AXGATE_TOOL_CHANGED).
	UpstreamChanged axerr.Reason = "upstream_changed"
	// UpstreamUnavailable: the upstream server cannot be reached (a
	// child process being restarted, a connection refused)
	// (AXGATE_STORE_UNAVAILABLE, retryable).
	UpstreamUnavailable axerr.Reason = "upstream_unavailable"
)
