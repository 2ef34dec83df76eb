package errors

// Reason is the machine-readable cause of a refusal, rendered as details.reason.
//
// An agent acts on it where one code has several causes (AXAG_RATE_LIMITED
// for a rate limit or an approval quota, say). The values are part of the
// public contract and listed in docs/errors.md. A tool's own
// refusals may carry reasons of their own, declared as Reason constants of
// the application (examples/shop does).
type Reason string

// WithReason sets details.reason and returns e.
func (e *Error) WithReason(r Reason) *Error { return e.With("reason", string(r)) }
