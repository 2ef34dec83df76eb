package errors

// TypeAuthorization is typeAuthorization, for the external tests.
var TypeAuthorization = typeAuthorization

// TypeConflict is typeConflict, for the external tests.
var TypeConflict = typeConflict

// TypeConstraint is typeConstraint, for the external tests.
var TypeConstraint = typeConstraint

// TypeInternal is typeInternal, for the external tests.
var TypeInternal = typeInternal

// TypeParameter is typeParameter, for the external tests.
var TypeParameter = typeParameter

// TypePrecondition is typePrecondition, for the external tests.
var TypePrecondition = typePrecondition

// TypeSafety is typeSafety, for the external tests.
var TypeSafety = typeSafety

// TypeSecurity is typeSecurity, for the external tests.
var TypeSecurity = typeSecurity
