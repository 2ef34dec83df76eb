// Package redisstore keeps the state of the axgate gates in Redis.
//
// With it, several replicas of a tool server enforce one manifest together: a
// confirmation token is spent once across all of them, a rate limit holds
// across all of them, and an approval decided through one replica is seen by
// the others.
//
// It implements the store interfaces of package gates with
// github.com/redis/go-redis/v9:
//
//   - NewReplayStore (a token.ReplayStore): used token ids (SET NX with an
//     expiry; several ids at once with a Lua script, all or nothing).
//   - NewLimiter (a gates.Limiter): the GCRA script of
//     github.com/go-redis/redis_rate, extended to take a call from several
//     counters (cooldown and rate limit) at once, all or nothing.
//   - NewIdempotencyStore (a gates.IdempotencyStore): an in-flight marker
//     held by a claim token, then the stored outcome (result or refusal),
//     both with an expiry; each operation is one script, which checks the
//     claim.
//   - NewApprovalStore (a gates.ApprovalStore): requests as JSON documents
//     with a per-tenant index for an approver's inbox; updates are
//     optimistic transactions (WATCH/MULTI/EXEC) retried on conflict.
//
// Each call on the hot path of a gate is one round trip to Redis (a single
// command or a script run with EVALSHA).
//
// # Failing closed
//
// Every operation runs under a timeout (Options.Timeout, 200ms by default).
// When Redis is unreachable, slower than the timeout or answers with an
// error, the operation returns that error and the gate refuses the call with
// AXGATE_STORE_UNAVAILABLE (503, retryable). Nothing is ever allowed because
// the store could not be asked. An operation that timed out may still have
// been applied by Redis (a token spent, a rate-limit slot taken): the call is
// refused all the same, which errs on the side of safety.
//
// Waiting for a pooled connection is not the store being down: an operation
// whose wait passed the pool timeout fails with an error matching
// gates.ErrStoreBusy (and redis.ErrPoolTimeout), refused with reason
// store_busy. Open sizes the pool (Options.PoolSize, PoolTimeout,
// MinIdleConns); PoolTimeout must stay below Timeout, or the wait ends as the
// operation's deadline instead.
//
// The timeout reaches the socket only when the client honours context
// deadlines: clients made by ParseURL and Open set
// redis.Options.ContextTimeoutEnabled. A client of your own should set it too
// (or keep its ReadTimeout and WriteTimeout short); otherwise a stalled server
// holds a call for the client's read timeout before it is refused.
//
// # Keys
//
// Every key starts with Options.Prefix ("axgate:" by default):
//
//	<prefix>jti:<token id>            used token ids
//	<prefix>rate:<key>                rate-limit and cooldown state (GCRA)
//	<prefix>idem:<key>                idempotency records (hash)
//	<prefix>idemown:<tenant, caller>  a caller's idempotency records, by expiry (its quota)
//	<prefix>apr:req:<id>              approval requests (JSON)
//	<prefix>apr:inbox:t:<tenant>      a tenant's approval requests, by creation time
//	<prefix>apr:inbox:all             every approval request, by creation time
//	<prefix>apr:sweep:t:<tenant>      where the next create sweeps a tenant's index
//	<prefix>apr:sweep:all             where the next create sweeps the index of all
//	<prefix>apr:pend:<tenant, caller> a requester's pending approval requests (its quota)
//
// The gates build the rate-limit and idempotency keys from the tenant, the
// caller and the intent, so those are per tenant already.
//
// With Redis Cluster, the scripts that touch several keys need them in one
// slot: put a hash tag in the prefix, such as "{axgate}:". That places all of
// axgate's keys on one shard.
//
// # Durability
//
// Replay protection is only as durable as Redis: a server restarted without
// persistence forgets which tokens were spent, and spent confirmation and
// approval tokens still within their lifetime are accepted again. Run Redis
// with AOF persistence (appendonly yes, appendfsync everysec or always). Open
// checks (CONFIG GET appendonly and save) and logs a warning on
// Options.Logger when Redis keeps no AOF.
package redisstore
