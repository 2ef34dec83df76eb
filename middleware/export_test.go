package middleware

// DefaultMaxArgItems is defaultMaxArgItems, for the external tests.
var DefaultMaxArgItems = defaultMaxArgItems

// DefaultMaxArgMembers is defaultMaxArgMembers, for the external tests.
var DefaultMaxArgMembers = defaultMaxArgMembers
