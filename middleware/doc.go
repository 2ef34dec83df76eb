// Package middleware holds the call, the invoker, the principal and the chain.
//
// They are axgate's core vocabulary: the Call, the Invoker that runs it, the
// Principal who makes it, and the chain of Stages (Interceptors) around it,
// composed by Build.
//
// A Call is one tool call: the tool name, the arguments as raw JSON (decoded
// once, lazily, and shared by every gate), the Principal the transport
// authenticated, and the Credentials that came with the call (confirmation
// and approval tokens, idempotency key, claimed tenant).
//
// An Invoker is the tool. An Interceptor wraps an Invoker the way gRPC
// interceptors do: it may refuse the call, pass it on, or look at the result.
// Every gate of axgate is an ordinary Interceptor, named by a Stage (the
// Stage* constants name the standard ones), so users can reorder, drop or add
// their own (axgate.WithPreExecution). Build composes stages around an
// Invoker once; invoking the result allocates nothing of its own. BuildFor
// does the same for the calls of one action, leaving out the stages whose
// Applies says they have nothing to check for it.
package middleware
