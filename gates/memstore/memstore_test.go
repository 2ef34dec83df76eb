package memstore_test

import (
	"testing"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/gates/storetest"
	"github.com/axgate/axgate/token"
)

// The memory stores keep the same contracts as the Redis stores of
// gates/redisstore, checked by the same suite.

func TestMemoryReplayStoreConformance(t *testing.T) {
	storetest.TestReplayStore(t, func(*testing.T) token.ReplayStore {
		return token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	})
}

func TestMemoryLimiterConformance(t *testing.T) {
	storetest.TestLimiter(t, func(*testing.T) gates.Limiter { return memstore.NewLimiter(0) })
}

func TestMemoryIdempotencyStoreConformance(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(*testing.T) gates.IdempotencyStore {
		return memstore.NewIdempotencyStore(0)
	})
}

func TestMemoryApprovalStoreConformance(t *testing.T) {
	storetest.TestApprovalStore(t, func(*testing.T) gates.ApprovalStore {
		return memstore.NewApprovalStore(memstore.ApprovalOptions{})
	})
}
