package errors

// Reason is the machine-readable cause of a refusal, rendered as
// details.reason: an agent acts on it where one code has several causes
// (AXAG_RATE_LIMITED for a rate limit or an approval quota, say). The values
// are part of the public contract and listed in the README's error table.
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

// WithReason sets details.reason and returns e.
func (e *Error) WithReason(r Reason) *Error { return e.With("reason", string(r)) }
