// Package gate holds the standard gates of axgate, one file per gate.
//
// The root package builds and assembles them.
//
// Each gate is an ordinary middleware.Interceptor, returned inside a named
// middleware.Stage. The types a user implements or configures (stores,
// records, options) are package gates'; public.go names them here under
// their old names. The confirmation and approval gates verify tokens with
// package token and spend them at the commit, right before the tool runs.
package gate
