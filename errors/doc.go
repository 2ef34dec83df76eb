// Package errors defines the one error type axgate answers every refusal with.
//
// It carries an AXAG error code, the category it belongs to, a message a
// person understands, details an agent can act on (intent, suggestion, the
// list of violations with JSON Pointer paths) and whether the agent may
// retry.
//
// Its import name is axerr, everywhere (examples, README, godoc, this
// repository's own code: .ci/importname checks it), so that it does not
// shadow the standard library's errors package:
//
//	import axerr "github.com/axgate/axgate/errors"
//
// An *Error works with errors.Is and errors.As. A Code is itself an error, so
// errors.Is(err, axerr.CodeRateLimited) asks "was this refused for being over
// the rate limit?" without caring about the message.
//
// Codes that AXAG defines carry the AXAG_ prefix; codes that axgate adds for
// situations AXAG does not name (an unknown parameter, an unauthenticated
// caller, a body that is too large, a failing store) carry AXGATE_, because
// AXAG reserves its own prefix.
package errors
