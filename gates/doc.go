// Package gates holds the standard gates of axgate, one file per gate. Each
// gate is an ordinary middleware.Interceptor, returned inside a named
// middleware.Stage, so the root package can assemble them in the standard
// order and users can reorder, drop or add their own.
//
// Gates that need state across calls (used token ids, rate-limit counters,
// idempotency records, approval requests) reach it through small store
// interfaces declared here, with in-memory implementations; package
// gates/redisstore shares them across replicas. A store that fails makes its
// gate refuse the call: gates fail closed.
package gates
