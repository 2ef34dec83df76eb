package errors

// Reason is the machine-readable cause of a refusal, rendered as details.reason.
//
// An agent acts on it where one code has several causes (AXAG_RATE_LIMITED
// for a rate limit or an approval quota, say). The values are part of the
// public contract and listed in docs/errors.md. A tool's own
// refusals may carry reasons of their own, declared as Reason constants of
// the application (examples/shop does).
type Reason string

// Reasons of refusals of the arguments themselves, before any gate looks at
// them (the one view of the arguments: RFC 7493 I-JSON).
const (
	// ReasonNumberNotInteroperable: a number a double cannot hold exactly
	// (an integer above 2^53 in magnitude, a decimal that rounds).
	ReasonNumberNotInteroperable Reason = "number_not_interoperable"
	// ReasonAmbiguousKeys: two keys of one object are equal under Unicode
	// simple case folding (tenant_id and TENANT_ID).
	ReasonAmbiguousKeys Reason = "ambiguous_keys"
	// ReasonTooManyMembers: an object has more members than the limit.
	ReasonTooManyMembers Reason = "too_many_members"
	// ReasonTooManyItems: an array has more items than the limit.
	ReasonTooManyItems Reason = "too_many_items"
	// ReasonInvalidString: a string escapes a UTF-16 surrogate that is not
	// half of a pair ("\ud800"), which decoders replace, refuse or keep.
	ReasonInvalidString Reason = "invalid_string"
	// ReasonUnsupportedMediaType: a body on a gated route is not JSON.
	ReasonUnsupportedMediaType Reason = "unsupported_media_type"
	// ReasonMethodNotAllowed: the path is bound to an action, the method is
	// not.
	ReasonMethodNotAllowed Reason = "method_not_allowed"
)

// Reasons of refusals by shared state that is bounded per caller.
const (
	// ReasonApprovalQuota: the requester has as many pending approval
	// requests as allowed.
	ReasonApprovalQuota Reason = "approval_quota"
	// ReasonIdempotencyQuota: the caller holds as many live idempotency
	// records as allowed.
	ReasonIdempotencyQuota Reason = "idempotency_quota"
	// ReasonAlreadyDecided: this approver has decided this request already.
	ReasonAlreadyDecided Reason = "already_decided"
	// ReasonApprovalDenied: a denial of this call vetoes it for the
	// approval tokens' maximum lifetime.
	ReasonApprovalDenied Reason = "approval_denied"
	// ReasonStoreBusy: the shared store is healthy but no connection was
	// free in time.
	ReasonStoreBusy Reason = "store_busy"
)

// Reasons of the access stage (roles, granted scopes, user scope, tenant):
// the checks share one stage, and the reason says which one refused.
const (
	// ReasonRoleMissing: the caller holds none of the action's roles
	// (AXAG_ROLE_INSUFFICIENT).
	ReasonRoleMissing Reason = "role_missing"
	// ReasonScopeNotGranted: the caller's granted scopes include none that
	// grants the action (AXAG_SCOPE_VIOLATION).
	ReasonScopeNotGranted Reason = "scope_not_granted"
	// ReasonArgumentOtherUser: a user argument names someone other than the
	// caller (AXAG_SCOPE_VIOLATION).
	ReasonArgumentOtherUser Reason = "argument_names_other_user"
	// ReasonNoCallerID: a user argument is set and the caller has no id to
	// match it with (AXAG_SCOPE_VIOLATION).
	ReasonNoCallerID Reason = "no_caller_id"
	// ReasonNoTenant: the action is tenant-scoped and the caller has no
	// tenant (AXAG_TENANT_BOUNDARY).
	ReasonNoTenant Reason = "no_tenant"
	// ReasonClaimedTenantMismatch: the request claims a tenant that is not
	// the caller's (AXAG_TENANT_BOUNDARY).
	ReasonClaimedTenantMismatch Reason = "claimed_tenant_mismatch"
	// ReasonArgumentOtherTenant: a tenant argument names a tenant other than
	// the caller's (AXAG_TENANT_BOUNDARY).
	ReasonArgumentOtherTenant Reason = "argument_names_other_tenant"
)

// Reasons of the constraint, precondition and postcondition stages: the
// expression did not hold, or could not be evaluated (fail closed).
const (
	// ReasonConstraintFailed: a relational constraint does not hold on the
	// arguments (AXAG_PRECONDITION_FAILED).
	ReasonConstraintFailed Reason = "constraint_failed"
	// ReasonConstraintNotEvaluable: a constraint could not be evaluated on
	// the arguments, for example a field it reads is absent
	// (AXAG_PRECONDITION_FAILED).
	ReasonConstraintNotEvaluable Reason = "constraint_not_evaluable"
	// ReasonPreconditionFailed: a precondition does not hold
	// (AXAG_PRECONDITION_FAILED).
	ReasonPreconditionFailed Reason = "precondition_failed"
	// ReasonPreconditionNotEvaluable: a precondition could not be checked
	// (AXAG_PRECONDITION_FAILED).
	ReasonPreconditionNotEvaluable Reason = "precondition_not_evaluable"
	// ReasonOutputSchema: the tool's result does not match the action's
	// output_schema (AXGATE_POSTCONDITION_FAILED).
	ReasonOutputSchema Reason = "output_schema"
	// ReasonResultNotJSON: the tool's result cannot be rendered as JSON
	// (AXGATE_POSTCONDITION_FAILED).
	ReasonResultNotJSON Reason = "result_not_json"
	// ReasonPostconditionFailed: a postcondition does not hold on the
	// result (AXGATE_POSTCONDITION_FAILED).
	ReasonPostconditionFailed Reason = "postcondition_failed"
	// ReasonPostconditionNotEvaluable: a postcondition could not be checked
	// on the result (AXGATE_POSTCONDITION_FAILED).
	ReasonPostconditionNotEvaluable Reason = "postcondition_not_evaluable"
)

// Reasons of the rate-limit stage (AXAG_RATE_LIMITED).
const (
	// ReasonRateLimit: the action's rate limit is reached.
	ReasonRateLimit Reason = "rate_limit"
	// ReasonCooldown: the action's cooldown since its last call has not
	// passed.
	ReasonCooldown Reason = "cooldown"
)

// Reasons of the confirmation gate besides those of a refused token
// (AXAG_CONFIRMATION_MISSING). A confirmation refused for its token carries
// the token's reason (token.Reason).
const (
	// ReasonDeclined: the person asked (through MCP elicitation) declined.
	ReasonDeclined Reason = "declined"
	// ReasonElicitationFailed: the person could not be asked.
	ReasonElicitationFailed Reason = "elicitation_failed"
	// ReasonElicitationStateInvalid: the answer to the confirmation question
	// was not issued for this call, expired or was already used (mcpgate).
	ReasonElicitationStateInvalid Reason = "elicitation_state_invalid"
)

// Reasons of the approval gate and the approval workflow
// (AXAG_APPROVAL_INVALID unless noted). Approval tokens refused one by one
// are listed in details.rejected_tokens with their token.Reason.
const (
	// ReasonTooManyTokens: more approval tokens were presented than are
	// checked.
	ReasonTooManyTokens Reason = "too_many_tokens"
	// ReasonSelfApproval: the requester approved (or tried to decide) their
	// own call.
	ReasonSelfApproval Reason = "self_approval"
	// ReasonRoleNotAllowed: the approver holds none of the action's
	// approval roles.
	ReasonRoleNotAllowed Reason = "role_not_allowed"
	// ReasonInvalidTransition: the approval request is no longer in a state
	// that allows the operation (decided, cancelled, expired).
	ReasonInvalidTransition Reason = "invalid_transition"
	// ReasonRequestNotFound: there is no such approval request (or the
	// caller may not learn of it).
	ReasonRequestNotFound Reason = "request_not_found"
	// ReasonNotAllowed: the caller is neither the requester nor an approver
	// of the request.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonNotRequester: only the requester may cancel the request.
	ReasonNotRequester Reason = "not_requester"
	// ReasonInvalidCursor: the inbox cursor was not handed out by this inbox
	// (AXGATE_INVALID_ARGUMENTS).
	ReasonInvalidCursor Reason = "invalid_cursor"
	// ReasonInvalidLimit: the inbox page size is out of range
	// (AXGATE_INVALID_ARGUMENTS, httpgate).
	ReasonInvalidLimit Reason = "invalid_limit"
)

// Reasons of authentication at a transport (AXGATE_UNAUTHENTICATED). A bearer
// token that is present and refused carries the token's reason
// (token.Reason: expired, bad_signature, …).
const (
	// ReasonMissingToken: the request has no bearer token.
	ReasonMissingToken Reason = "missing_token"
	// ReasonNoAuthenticator: the server has no authentication configured
	// and refuses every call.
	ReasonNoAuthenticator Reason = "no_authenticator"
	// ReasonBadClaim: a claim of the bearer token has the wrong JSON type.
	ReasonBadClaim Reason = "bad_claim"
)

// Reasons of a gateway in front of an upstream tool server (the MCP gateway).
const (
	// ReasonUpstreamChanged: the upstream's definition of the tool no longer
	// matches the manifest's upstream_sha256 pin; the tool stays disabled
	// until the pin is updated after review (AXGATE_TOOL_CHANGED).
	ReasonUpstreamChanged Reason = "upstream_changed"
	// ReasonUpstreamUnavailable: the upstream server cannot be reached (a
	// child process being restarted, a connection refused)
	// (AXGATE_STORE_UNAVAILABLE, retryable).
	ReasonUpstreamUnavailable Reason = "upstream_unavailable"
)

// WithReason sets details.reason and returns e.
func (e *Error) WithReason(r Reason) *Error { return e.With("reason", string(r)) }
