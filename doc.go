// Package axgate enforces an AXAG manifest on the tool calls of AI agents.
//
// New reads a loaded manifest and assembles the standard interceptor chain,
// cheapest and most fundamental check first: resolve the intent; roles,
// scope and tenant; parameters against the compiled JSON Schema; relational
// constraints and preconditions; rate limit and cooldown; the confirmation
// and approval gates; idempotency; then the tool itself, and afterwards its
// postconditions. Wrap puts that chain around any tool Invoker; Check runs the
// pre-execution gates without invoking anything; Validate answers the Tool
// Validation API (POST /tools/{name}/validate).
//
// The call, the principal, the invoker and the stages of the chain are
// package middleware's (middleware.Call, middleware.Principal,
// middleware.Invoker, middleware.Stage): start there to read how a call flows.
// The stores and options of the gates are package gates'; the in-memory
// stores, gates/memstore; shared ones, gates/redisstore.
//
// Every refusal is an *axerr.Error (package errors, imported as axerr) with an
// AXAG code, a message for a person and details an agent can act on.
package axgate
