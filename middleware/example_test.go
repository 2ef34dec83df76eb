package middleware_test

import (
	"context"
	"fmt"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// A gate of your own is an Interceptor in a named Stage.
func ExampleBuild() {
	businessHours := middleware.Stage{Name: "business_hours", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if call.Tool == "payout_send" {
			return middleware.Result{}, axerr.New(axerr.CodePreconditionFailed, "payouts run in business hours only")
		}
		return next.Invoke(ctx, call)
	}}
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "sent"}, nil
	})
	inv := middleware.Build(tool, nil, businessHours)
	_, err := inv.Invoke(context.Background(), middleware.NewCall("payout_send", nil, middleware.Principal{ID: "u"}))
	e, _ := axerr.As(err)
	fmt.Println(e.Code, e.Gate)
	// Output: AXAG_PRECONDITION_FAILED business_hours
}
