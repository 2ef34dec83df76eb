// Package token holds the signed, single-use tokens of axgate.
//
// It holds the keys that sign and verify them, the Verifier that checks one
// against RFC 8725's rules, the Claims that bind a token to one call, the
// Issuer that signs confirmation and approval tokens, the Reason a token is
// refused for, and the ReplayStore that remembers which tokens were spent.
//
// A confirmation token says that a person confirmed one exact call: its
// intent, its caller, its tenant and the RFC 8785 digest of its arguments
// (args_sha256). An approval token says the same of another person's
// approval. Neither is a gate: the confirmation and approval gates in package
// gates verify tokens with a Verifier, check the binding with
// Claims.CheckBinding and spend them in a ReplayStore when the call commits.
// The store of NewMemoryReplayStore forgets what was spent before it was made (a restart),
// so the gates refuse a token issued before then (reason issued_before_start).
//
// Keys are golang-jwt keys bound to one algorithm each (Key), gathered in a
// KeySet: a static set, a JWKS document or file (ParseJWKS, LoadJWKSFile), or
// a JWKS URL refreshed in the background (NewRemoteKeySet).
package token
