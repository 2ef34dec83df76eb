package gate

import "github.com/axgate/axgate/middleware"

// StandardOrder returns the names of the standard chain's stages, outermost first.
//
// That is the order an enforcer builds: StageObserve (present
// only when telemetry is configured), the gates that check a call on its way
// in, the commit, then the postconditions around the tool. An action's own
// chain is this order with the stages that do not apply to it left out. The
// slice is new on every call.
func StandardOrder() []string {
	return []string{
		middleware.StageObserve,
		StageIntent, StageAccess, StageParams, StageConstraints, StagePreconditions,
		StageRateLimit, StageConfirmation, StageApproval, StageIdempotency,
		StageCommit, StagePostconditions,
	}
}
