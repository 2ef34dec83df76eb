package middleware

// DefaultMaxArgItems is defaultMaxArgItems, for the external tests.
var DefaultMaxArgItems = defaultMaxArgItems

// DefaultMaxArgMembers is defaultMaxArgMembers, for the external tests.
var DefaultMaxArgMembers = defaultMaxArgMembers

// InstrumentationName is instrumentationName, for the external tests.
var InstrumentationName = instrumentationName
