package middleware

// Stage names: the one catalogue of the names a stage of the standard chain
// carries. A refusal's details.gate, the axag.gate span attribute and the
// names Enforcer.Stages returns are these values; a custom chain that edits
// the standard one finds its stages by them.
const (
	// StageIntent resolves the tool to its manifest action.
	StageIntent = "intent"
	// StageAccess checks roles, granted scopes, user scope and tenant. The
	// checks share one stage (one lookup of the action's precomputed rule
	// per call); a refusal says which check decided in details.reason.
	StageAccess = "access"
	// StageParams validates the arguments against the action's parameters.
	StageParams = "params"
	// StageConstraints checks the relational constraints and conditions.
	StageConstraints = "constraints"
	// StagePreconditions checks the preconditions.
	StagePreconditions = "preconditions"
	// StageRateLimit enforces rate limits and cooldowns.
	StageRateLimit = "rate_limit"
	// StageConfirmation is the confirmation gate.
	StageConfirmation = "confirmation"
	// StageApproval is the approval gate.
	StageApproval = "approval"
	// StageIdempotency replays or reserves an idempotent call.
	StageIdempotency = "idempotency"
	// StageCommit spends the call's tokens right before the tool runs.
	StageCommit = "commit"
	// StagePostconditions checks a tool's result: its output_schema and its
	// postconditions.
	StagePostconditions = "postconditions"
	// StageTool names the tool itself in a refusal the tool returns.
	StageTool = "tool"
)
