// Package memstore holds the in-memory stores of the gates, for one process.
//
// They are the defaults axgate.New uses when no store is given.
//
// Each bounds what one tenant may make it hold, and refuses (the gate then
// refuses the call: never let through uncounted, never run unrecorded) rather
// than grow past it; other tenants are unaffected. For several replicas use
// gates/redisstore.
package memstore

import (
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
)

// NewLimiter returns a rate limiter that holds at most maxKeys busy keys per
// tenant (100,000 when maxKeys ≤ 0); idle keys are forgotten.
func NewLimiter(maxKeys int) gates.Limiter { return gate.NewMemoryLimiter(maxKeys) }

// NewIdempotencyStore returns an idempotency store that holds at most maxKeys
// live records per tenant (100,000 when maxKeys ≤ 0); expired records are
// forgotten.
func NewIdempotencyStore(maxKeys int) gates.IdempotencyStore {
	return gate.NewMemoryIdempotencyStore(maxKeys)
}

// ApprovalOptions bound an approval store's memory per tenant.
type ApprovalOptions struct {
	// MaxRequests bounds the requests held per tenant (100,000 when zero).
	// Requests past their retention are dropped to make room.
	MaxRequests int
	// MaxBytes bounds the bytes of call arguments held per tenant (64 MiB
	// when zero): the arguments of a request are held until it is decided
	// for good.
	MaxBytes int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewApprovalStore returns an empty approval store.
func NewApprovalStore(o ApprovalOptions) gates.ApprovalStore {
	return gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxRequests: o.MaxRequests, MaxBytes: o.MaxBytes, Now: o.Now})
}
