// Package middleware defines the call flowing through axgate and its interceptor chain.
//
// A Call is one tool call: the tool name, the arguments as raw JSON (decoded
// once, lazily, and shared by every gate), the Principal the transport
// authenticated, and the Credentials that came with the call (confirmation
// and approval tokens, idempotency key, claimed tenant).
//
// An Invoker is the tool. An Interceptor wraps an Invoker the way gRPC
// interceptors do: it may refuse the call, pass it on, or look at the result.
// Every gate of axgate is an ordinary Interceptor, named by a Stage, so users
// can reorder, drop or add their own. Build composes stages around an
// Invoker once; invoking the result allocates nothing of its own. BuildFor
// does the same for the calls of one action, leaving out the stages whose
// Applies says they have nothing to check for it.
package middleware
