// Package gates holds what a user implements or configures for axgate's gates.
//
// That is the store interfaces with their records and errors, and the gates'
// options.
//
// Gates that need state across calls reach it through the stores declared
// here: a Limiter counts rate limits and cooldowns, an IdempotencyStore keeps
// the outcomes of non-idempotent calls, an ApprovalStore the approval
// requests (used token ids live in a token.ReplayStore). gates/memstore holds
// the in-memory ones, for one process, and gates/redisstore shares them across
// replicas; gates/storetest checks an implementation against the contracts
// written here. A store that fails makes its gate refuse the call: gates fail
// closed.
//
// axgate.New builds the gates themselves and assembles them in the standard
// order; their names are middleware's Stage* constants.
//
// A replay store that forgets across restarts (token.NewMemoryReplayStore's)
// says since when it remembers; the confirmation and approval gates refuse a
// token issued before then (reason issued_before_start), which it could not
// tell from one spent before the restart: a restart voids the outstanding
// tokens, unless they are kept in Redis.
package gates
