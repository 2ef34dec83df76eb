// Package gates holds the standard gates of axgate, one file per gate.
//
// Each gate is an ordinary middleware.Interceptor, returned inside a named
// middleware.Stage, so the root package can assemble them in the standard
// order and users can reorder, drop or add their own.
//
// Gates that need state across calls (rate-limit counters, idempotency
// records, approval requests) reach it through small store interfaces
// declared here, with in-memory implementations; used token ids live in a
// token.ReplayStore. The confirmation and approval gates verify tokens with
// package token and spend them here, at the commit, right before the tool
// runs; package
// gates/redisstore shares them across replicas. A store that fails makes its
// gate refuse the call: gates fail closed.
//
// A replay store that forgets across restarts (token.MemoryReplayStore)
// says since when it remembers; the confirmation and approval gates refuse a
// token issued before then (token.ReasonIssuedBeforeStart), which it could
// not tell from one spent before the restart: a restart voids the
// outstanding tokens, unless they are kept in Redis.
package gates
