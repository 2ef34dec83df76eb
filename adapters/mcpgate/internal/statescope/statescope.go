// Package statescope carries, from the gateway to mcpgate's handler, the
// scope a request state is bound to: the upstream a call of a gateway with
// several goes to. mcpgate signs it into the state of each question it
// asks about the call and takes back only a state of the same scope.
package statescope

import "context"

type key struct{}

// With returns ctx whose calls' request states are bound to scope.
func With(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, key{}, scope)
}

// Of returns the scope of ctx ("" for none).
func Of(ctx context.Context) string {
	s, _ := ctx.Value(key{}).(string)
	return s
}
