package gate

import "github.com/axgate/axgate/token"

// ReplayOf returns the replay store an *axgate.Enforcer spends its tokens
// in, or nil for anything else; package axgate sets it. The decision pages
// (httpgate) record their single-use sign-ins and ended sessions there, so
// that replicas sharing the enforcer's store (Redis) share them too.
var ReplayOf func(enforcer any) token.ReplayStore
