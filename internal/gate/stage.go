package gate

import (
	"context"

	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// checkStage returns a chain stage that runs check before the rest of the
// chain: a non-nil error refuses the call, nil passes it on. It is the Stage
// of every gate that only looks at a call on its way in; applies, when not
// nil, is the stage's Applies.
func checkStage(name string, applies func(*manifest.Action) bool, check func(context.Context, *middleware.Call) error) middleware.Stage {
	return middleware.Stage{Name: name, Applies: applies, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if err := check(ctx, call); err != nil {
			return middleware.Result{}, err
		}
		return next.Invoke(ctx, call)
	}}
}
