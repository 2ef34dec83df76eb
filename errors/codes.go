package errors

import "net/http"

// Code is a stable, machine-readable error code. It implements error so that
// errors.Is(err, code) reports whether err is an *Error with that code.
type Code string

// Error returns the code itself.
func (c Code) Error() string { return string(c) }

// Type is the category an error code belongs to, as in the AXAG runtime error
// table (parameter_error, constraint_error, …).
type Type string

// Categories of the AXAG error table, plus the ones axgate adds.
const (
	typeParameter      Type = "parameter_error"
	typeConstraint     Type = "constraint_error"
	typePrecondition   Type = "precondition_error"
	typeSafety         Type = "safety_error"
	typeSecurity       Type = "security_error"
	typeAuthorization  Type = "authorization_error"
	typeRouting        Type = "routing_error"
	typeVersion        Type = "version_error"
	typeRateLimit      Type = "rate_limit_error"
	typeAuthentication Type = "authentication_error"
	typeRequest        Type = "request_error"
	typeConflict       Type = "conflict_error"
	typeExecution      Type = "execution_error"
	typePostcondition  Type = "postcondition_error"
	typeUnavailable    Type = "unavailable_error"
	typeInternal       Type = "internal_error"
)

// The runtime codes of the AXAG error table.
const (
	CodeMissingParam        Code = "AXAG_MISSING_PARAM"
	CodeInvalidType         Code = "AXAG_INVALID_TYPE"
	CodeOutOfRange          Code = "AXAG_OUT_OF_RANGE"
	CodeInvalidEnum         Code = "AXAG_INVALID_ENUM"
	CodeInvalidFormat       Code = "AXAG_INVALID_FORMAT"
	CodePreconditionFailed  Code = "AXAG_PRECONDITION_FAILED"
	CodeConfirmationMissing Code = "AXAG_CONFIRMATION_MISSING"
	CodeApprovalMissing     Code = "AXAG_APPROVAL_MISSING"
	CodeApprovalInvalid     Code = "AXAG_APPROVAL_INVALID"
	CodeScopeViolation      Code = "AXAG_SCOPE_VIOLATION"
	CodeTenantBoundary      Code = "AXAG_TENANT_BOUNDARY"
	CodeRoleInsufficient    Code = "AXAG_ROLE_INSUFFICIENT"
	CodeIntentNotFound      Code = "AXAG_INTENT_NOT_FOUND"
	CodeVersionMismatch     Code = "AXAG_VERSION_MISMATCH"
	CodeRateLimited         Code = "AXAG_RATE_LIMITED"
)

// Codes axgate adds for what AXAG does not define.
const (
	// CodeUnknownParam: an argument the action does not declare.
	CodeUnknownParam Code = "AXGATE_UNKNOWN_PARAM"
	// CodeInvalidArguments: the arguments are not a JSON object, not UTF-8,
	// nested too deeply, or repeat a key.
	CodeInvalidArguments Code = "AXGATE_INVALID_ARGUMENTS"
	// CodeUnauthenticated: no caller, or credentials that do not verify.
	CodeUnauthenticated Code = "AXGATE_UNAUTHENTICATED"
	// CodePayloadTooLarge: the arguments are over the configured size.
	CodePayloadTooLarge Code = "AXGATE_PAYLOAD_TOO_LARGE"
	// CodeUnsupportedMediaType: a request body that is not JSON
	// (application/json or a +json type, in UTF-8).
	CodeUnsupportedMediaType Code = "AXGATE_UNSUPPORTED_MEDIA_TYPE"
	// CodeMethodNotAllowed: the path is bound to a tool, the method is not.
	CodeMethodNotAllowed Code = "AXGATE_METHOD_NOT_ALLOWED"
	// CodeIdempotencyKeyReused: an idempotency key sent again with other arguments.
	CodeIdempotencyKeyReused Code = "AXGATE_IDEMPOTENCY_KEY_REUSED"
	// CodeDuplicateInFlight: the same call is still running.
	CodeDuplicateInFlight Code = "AXGATE_DUPLICATE_IN_FLIGHT"
	// CodeDuplicateCall: the same non-idempotent call was made moments ago.
	CodeDuplicateCall Code = "AXGATE_DUPLICATE_CALL"
	// CodeAlreadyDecided: an approver decides an approval request a second
	// time.
	CodeAlreadyDecided Code = "AXGATE_ALREADY_DECIDED"
	// CodeToolChanged: the upstream's definition of the tool no longer matches its pin.
	//
	// The definition is the tool's name, description, input schema and
	// annotations; the pin is the digest the manifest holds in
	// upstream_sha256. The gateway disables the tool rather than forward
	// calls to a definition nobody reviewed (a "rug pull"). Not retryable:
	// only an operator updating the pin clears it.
	CodeToolChanged Code = "AXGATE_TOOL_CHANGED"
	// CodeToolFailed: the tool returned an error that is not an *Error.
	CodeToolFailed Code = "AXGATE_TOOL_FAILED"
	// CodePostconditionFailed: the tool ran but did not do what it promised.
	CodePostconditionFailed Code = "AXGATE_POSTCONDITION_FAILED"
	// CodeStoreUnavailable: shared state could not be read or written.
	CodeStoreUnavailable Code = "AXGATE_STORE_UNAVAILABLE"
	// CodeInternal: a fault in axgate or its configuration.
	CodeInternal Code = "AXGATE_INTERNAL"
)

// codeInfo is what the error table says about a code.
type codeInfo struct {
	typ       Type
	status    int
	retryable bool
	// action tells an agent what to do next (the spec's agent handling table).
	action string
}

var table = map[Code]codeInfo{
	CodeMissingParam:        {typeParameter, http.StatusBadRequest, true, "Add the missing parameter and call again."},
	CodeInvalidType:         {typeParameter, http.StatusBadRequest, true, "Send the parameter with the declared type and call again."},
	CodeOutOfRange:          {typeConstraint, http.StatusBadRequest, true, "Choose a value inside the declared bounds and call again."},
	CodeInvalidEnum:         {typeConstraint, http.StatusBadRequest, true, "Choose one of the allowed values and call again."},
	CodeInvalidFormat:       {typeParameter, http.StatusBadRequest, true, "Send the value in the declared format and call again."},
	CodePreconditionFailed:  {typePrecondition, http.StatusPreconditionFailed, true, "Bring about the failed precondition (see suggestion), then call again."},
	CodeConfirmationMissing: {typeSafety, http.StatusPreconditionRequired, true, "Ask the user to confirm this exact call, then call again with the confirmation token."},
	CodeApprovalMissing:     {typeSafety, http.StatusPreconditionRequired, true, "Request approval from a person in an approval role, then call again with the approval tokens."},
	CodeApprovalInvalid:     {typeSafety, http.StatusForbidden, false, "Obtain approval from a different person who holds an approval role."},
	CodeScopeViolation:      {typeSecurity, http.StatusForbidden, false, "Do not retry; the operation is outside the caller's scope."},
	CodeTenantBoundary:      {typeSecurity, http.StatusForbidden, false, "Do not retry; the operation crosses a tenant boundary."},
	CodeRoleInsufficient:    {typeAuthorization, http.StatusForbidden, false, "Do not retry; ask a user with a required role to perform the action."},
	CodeIntentNotFound:      {typeRouting, http.StatusNotFound, false, "Use one of the tools the server lists."},
	CodeVersionMismatch:     {typeVersion, http.StatusConflict, false, "Reload the manifest and use its current version."},
	CodeRateLimited:         {typeRateLimit, http.StatusTooManyRequests, true, "Wait retry_after seconds, then call again."},

	CodeUnknownParam:         {typeParameter, http.StatusBadRequest, true, "Remove the undeclared parameter (check its spelling) and call again."},
	CodeInvalidArguments:     {typeParameter, http.StatusBadRequest, true, "Send the arguments as one well-formed JSON object and call again."},
	CodeUnauthenticated:      {typeAuthentication, http.StatusUnauthorized, false, "Authenticate and call again."},
	CodePayloadTooLarge:      {typeRequest, http.StatusRequestEntityTooLarge, false, "Send smaller arguments."},
	CodeUnsupportedMediaType: {typeRequest, http.StatusUnsupportedMediaType, true, "Send the arguments as a JSON object with Content-Type: application/json."},
	CodeMethodNotAllowed:     {typeRouting, http.StatusMethodNotAllowed, true, "Call again with one of the methods the Allow header lists."},
	CodeIdempotencyKeyReused: {typeConflict, http.StatusUnprocessableEntity, false, "Use a new idempotency key for different arguments."},
	CodeDuplicateInFlight:    {typeConflict, http.StatusConflict, true, "Wait for the first call to finish, then call again with the same key."},
	CodeDuplicateCall:        {typeConflict, http.StatusConflict, false, "This exact call was just made; do not repeat it unless the user asks."},
	CodeAlreadyDecided:       {typeConflict, http.StatusConflict, false, "Do not decide again; the first decision stands."},
	CodeToolChanged:          {typeConflict, http.StatusConflict, false, "Do not retry; the tool changed upstream and stays disabled until an operator reviews it and updates the manifest's upstream_sha256 pin."},
	CodeToolFailed:           {typeExecution, http.StatusBadGateway, true, "The tool failed; try again later or report the failure."},
	CodePostconditionFailed:  {typePostcondition, http.StatusBadGateway, false, "The tool did not do what it promised; do not assume it succeeded."},
	CodeStoreUnavailable:     {typeUnavailable, http.StatusServiceUnavailable, true, "Try again shortly."},
	CodeInternal:             {typeInternal, http.StatusInternalServerError, false, "Report the failure to the operator."},
}

func (c Code) info() codeInfo {
	if i, ok := table[c]; ok {
		return i
	}
	return codeInfo{typeInternal, http.StatusInternalServerError, false, ""}
}

// Type returns the category of the code.
func (c Code) Type() Type { return c.info().typ }

// HTTPStatus returns the HTTP status the error table gives the code.
func (c Code) HTTPStatus() int { return c.info().status }

// Retryable reports whether an agent may call again (after changing what the
// error says to change).
func (c Code) Retryable() bool { return c.info().retryable }

// AgentAction says in one sentence what an agent should do next.
func (c Code) AgentAction() string { return c.info().action }

// Codes lists every code axgate can answer with, in table order: AXAG's first.
func Codes() []Code {
	return []Code{
		CodeMissingParam, CodeInvalidType, CodeOutOfRange, CodeInvalidEnum, CodeInvalidFormat,
		CodePreconditionFailed, CodeConfirmationMissing, CodeApprovalMissing, CodeApprovalInvalid,
		CodeScopeViolation, CodeTenantBoundary, CodeRoleInsufficient, CodeIntentNotFound,
		CodeVersionMismatch, CodeRateLimited,
		CodeUnknownParam, CodeInvalidArguments, CodeUnauthenticated, CodePayloadTooLarge,
		CodeUnsupportedMediaType, CodeMethodNotAllowed,
		CodeIdempotencyKeyReused, CodeDuplicateInFlight, CodeDuplicateCall, CodeAlreadyDecided, CodeToolChanged, CodeToolFailed,
		CodePostconditionFailed, CodeStoreUnavailable, CodeInternal,
	}
}
