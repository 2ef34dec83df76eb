package mcpgate

import "time"

// WithClock sets the clock that dates the request state of confirmation
// questions, so that tests can let one expire.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.elicit.now = now }
}

// ToolCanonical is the canonical JSON ToolDigest hashes, so that tests can
// read what is pinned.
var ToolCanonical = toolCanonical

// DefaultElicitationTTL is defaultElicitationTTL, for the external tests.
var DefaultElicitationTTL = defaultElicitationTTL
