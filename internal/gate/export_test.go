package gate

// ApprovalListed is how many records s's List calls examined, for tests of
// the cost of an inbox page.
func ApprovalListed(s *MemoryApprovalStore) int64 { return s.listed.Load() }

// ApprovalShards is how many tenants s holds a shard for.
func ApprovalShards(s *MemoryApprovalStore) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.shards)
}
