package reasons

// Reasons a token is refused (token.Reason, in token.Error and in
// details.rejected_tokens). Untyped: the token package, which declares
// Reason, uses them, and an untyped constant converts where one is needed.
const (
	TokenTooLarge       = "too_large"
	TokenMalformed      = "malformed"
	TokenType           = "wrong_type"
	TokenAlgorithm      = "algorithm_not_allowed"
	TokenCriticalHeader = "unsupported_critical_header"
	TokenUnknownKey     = "unknown_key"
	TokenBadSignature   = "bad_signature"
	TokenMissingClaim   = "missing_claim"
	TokenExpired        = "expired"
	TokenNotYetValid    = "not_yet_valid"
	TokenIssuedInFuture = "issued_in_future"
	TokenLifetime       = "lifetime_too_long"
	TokenIssuer         = "wrong_issuer"
	TokenAudience       = "wrong_audience"
	TokenUsed           = "already_used"
	TokenOtherArguments = "bound_to_other_arguments"
	TokenOtherIntent    = "bound_to_other_intent"
	TokenOtherCaller    = "bound_to_other_caller"
	TokenOtherTenant    = "bound_to_other_tenant"
	// TokenVoid: an approval token issued before a denial of its call,
	// or before its call last ran on the approval request.
	TokenVoid = "void"
	// TokenIssuedBeforeStart: a token issued before the replay store
	// started remembering spent tokens (an in-memory store, made when the
	// process started), which it cannot tell from one spent before a
	// restart.
	TokenIssuedBeforeStart = "issued_before_start"
)
