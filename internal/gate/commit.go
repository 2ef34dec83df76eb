package gate

import (
	"context"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// Commit returns the stage that runs the work the gates deferred.
//
// That work (spending the presented tokens, charging the rate limit) runs
// once every gate before the stage has allowed the call. It belongs after
// the last pre-execution gate and before the tool; a chain of your own
// (middleware.Build) around the token gates needs it too, since the end of
// every chain refuses a call whose deferred work never ran
// (AXGATE_INTERNAL) rather than run the tool with its tokens unspent. It
// refuses a check-only call: such a call must never reach the tool.
func Commit() middleware.Stage {
	return middleware.Stage{Name: StageCommit, Interceptor: commit}
}

func commit(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	if call.CheckOnly() {
		// A checked call spends nothing; it must never run either.
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "a call marked check-only reached the tool; it was refused").WithIntent(call.Intent())
	}
	if err := call.RunCommits(ctx); err != nil {
		return middleware.Result{}, err
	}
	return next.Invoke(ctx, call)
}
