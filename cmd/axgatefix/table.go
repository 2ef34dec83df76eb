package main

// modulePath is axgate's module.
const modulePath = "github.com/axgate/axgate"

const (
	gates       = modulePath + "/gates"
	memstore    = modulePath + "/gates/memstore"
	middleware  = modulePath + "/middleware"
	mcpgate     = modulePath + "/adapters/mcpgate"
	manifestPkg = modulePath + "/manifest"
	redisstore  = modulePath + "/gates/redisstore"
)

// renames maps an old name (import path + "." + name) to its new one.
var renames = map[string]string{
	gates + ".NewMemoryLimiter":          memstore + ".NewLimiter",
	gates + ".NewMemoryIdempotencyStore": memstore + ".NewIdempotencyStore",
	gates + ".NewMemoryApprovalStore":    memstore + ".NewApprovalStore",
	gates + ".MemoryApprovalOptions":     memstore + ".ApprovalOptions",
	gates + ".ApprovalQuotaError":        gates + ".QuotaError",
	gates + ".PreconditionFailed":        modulePath + ".PreconditionFailed",
	gates + ".StageIntent":               middleware + ".StageIntent",
	gates + ".StageAccess":               middleware + ".StageAccess",
	gates + ".StageParams":               middleware + ".StageParams",
	gates + ".StageConstraints":          middleware + ".StageConstraints",
	gates + ".StagePreconditions":        middleware + ".StagePreconditions",
	gates + ".StageRateLimit":            middleware + ".StageRateLimit",
	gates + ".StageConfirmation":         middleware + ".StageConfirmation",
	gates + ".StageApproval":             middleware + ".StageApproval",
	gates + ".StageIdempotency":          middleware + ".StageIdempotency",
	gates + ".StageCommit":               middleware + ".StageCommit",
	gates + ".StagePostconditions":       middleware + ".StagePostconditions",
	gates + ".StageTool":                 middleware + ".StageTool",
	mcpgate + ".TokenInfoPrincipal":      mcpgate + ".BearerPrincipal",
	manifestPkg + ".ParseJSON":           manifestPkg + ".Parse",
	manifestPkg + ".ParseYAML":           manifestPkg + ".Parse",
}

// pointerTypes maps a pointer to an old concrete store type to the
// interface its constructor now returns.
var pointerTypes = map[string]string{
	gates + ".MemoryLimiter":                gates + ".Limiter",
	gates + ".MemoryIdempotencyStore":       gates + ".IdempotencyStore",
	gates + ".MemoryApprovalStore":          gates + ".ApprovalStore",
	modulePath + "/token.MemoryReplayStore": modulePath + "/token.ReplayStore",
	redisstore + ".Limiter":                 gates + ".Limiter",
	redisstore + ".IdempotencyStore":        gates + ".IdempotencyStore",
	redisstore + ".ApprovalStore":           gates + ".ApprovalStore",
	redisstore + ".ReplayStore":             modulePath + "/token.ReplayStore",
}

// removed maps an old name with no mechanical replacement to what to do.
var removed = map[string]string{
	gates + ".StandardOrder":           "removed: (*axgate.Enforcer).Stages lists an enforcer's stages in order",
	gates + ".ErrApprovalQuota":        "removed: match a *gates.QuotaError with errors.As",
	gates + ".ErrIdempotencyQuota":     "removed: match a *gates.QuotaError with errors.As",
	gates + ".PageLimit":               "removed: a store returns at most 100 requests a page, 50 when asked for 0",
	gates + ".MaxApprovalPage":         "removed: a page holds at most 100 requests",
	gates + ".DefaultApprovalPage":     "removed: a page holds 50 requests when none is asked for",
	gates + ".StateKey":                "removed: a store names its keys as it likes",
	gates + ".ValidateTransition":      "removed: the approval states move pending → approved | denied | expired | cancelled | executed, approved → executed",
	gates + ".StoreUnavailable":        "removed: return your own *axerr.Error (axerr.CodeStoreUnavailable) from a check",
	gates + ".Notifier":                "",
	gates + ".NotifierFunc":            "removed: implement gates.Notifier (one method, ApprovalRequested)",
	gates + ".DefaultMaxKeys":          "removed: a memory store holds 100,000 keys per tenant when given 0",
	gates + ".DefaultCELCostLimit":     "removed: the default cost limit is 1,000,000 (axgate.WithCELCostLimit)",
	gates + ".DefaultUserArgs":         "removed: the defaults are documented on gates.AccessOptions",
	gates + ".DefaultTenantArgs":       "removed: the defaults are documented on gates.AccessOptions",
	gates + ".DefaultApprovalQuota":    "removed: documented on axgate.ApprovalOptions.Quota",
	gates + ".DefaultApprovalRequests": "removed: documented on memstore.ApprovalOptions",
	gates + ".DefaultApprovalBytes":    "removed: documented on memstore.ApprovalOptions",
	modulePath + ".WithCondition":      "", // rewritten when an argument of a call
}

func init() {
	// The gate machinery moved to an internal package: the enforcer
	// (axgate.New and its options) builds and runs the gates.
	for _, n := range []string{
		"Access", "NewAccess", "Approval", "NewApproval", "ApprovalConfig",
		"Confirmation", "NewConfirmation", "ConfirmationConfig",
		"Constraints", "NewConstraints", "Idempotency", "NewIdempotency",
		"Intent", "Commit", "RateLimit", "Params", "NewParams",
		"Precondition", "Preconditions", "NewPreconditions",
		"Postcondition", "Postconditions", "NewPostconditions",
		"Checker", "ResultChecker", "CELLimits", "CELCostError", "ErrCELCostLimit",
		"LintConstraints", "Producers", "ScopeGrants", "RenderConfirmationMessage",
		"IntentNotFound", "RateLimited", "DuplicateCall", "DuplicateMarkersExceeded",
		"IdempotencyQuotaExceeded", "ApprovalRequestID", "MaxApprovalTokens",
		"MaxVoidedTokens", "KeywordAmbiguousKey", "ErrStoreFull", "ErrApprovalStoreFull",
		"DefaultIdempotencyWindow", "DefaultIdempotencyLease", "DefaultDuplicateWindow",
		"DefaultIdempotencyQuota", "DefaultNotificationsPerMinute",
	} {
		if _, ok := removed[gates+"."+n]; !ok {
			removed[gates+"."+n] = "removed: the gates are built by axgate.New; configure them with its options"
		}
	}
	for k, v := range removed {
		if v == "" {
			delete(removed, k)
		}
	}
}

// literal is the value an old constant is now written as: a string literal,
// converted to typ (of the constant's package) when typ is set.
type literal struct{ typ, value string }

// literals maps constants that left the API, because their values are wire
// strings documented in the README, to those strings.
var literals = map[string]literal{}

func init() {
	const tokenPkg = modulePath + "/token"
	for _, alg := range []string{"EdDSA", "ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "HS256"} {
		literals[tokenPkg+".Alg"+alg] = literal{value: alg}
	}
	// token.ReasonX → token.Reason("x"): a token's reasons are wire strings.
	for name, v := range map[string]string{
		"ReasonTooLarge":          "too_large",
		"ReasonMalformed":         "malformed",
		"ReasonType":              "wrong_type",
		"ReasonAlgorithm":         "algorithm_not_allowed",
		"ReasonCriticalHeader":    "unsupported_critical_header",
		"ReasonUnknownKey":        "unknown_key",
		"ReasonBadSignature":      "bad_signature",
		"ReasonMissingClaim":      "missing_claim",
		"ReasonExpired":           "expired",
		"ReasonNotYetValid":       "not_yet_valid",
		"ReasonIssuedInFuture":    "issued_in_future",
		"ReasonLifetime":          "lifetime_too_long",
		"ReasonIssuer":            "wrong_issuer",
		"ReasonAudience":          "wrong_audience",
		"ReasonUsed":              "already_used",
		"ReasonOtherArguments":    "bound_to_other_arguments",
		"ReasonOtherIntent":       "bound_to_other_intent",
		"ReasonOtherCaller":       "bound_to_other_caller",
		"ReasonOtherTenant":       "bound_to_other_tenant",
		"ReasonVoid":              "void",
		"ReasonIssuedBeforeStart": "issued_before_start",
	} {
		literals[tokenPkg+"."+name] = literal{typ: "Reason", value: v}
	}
}

func init() {
	// Lint rule ids are wire strings: findings carry them in Finding.Rule.
	for name, v := range map[string]string{
		"RuleParse": "AXGATE-PARSE", "RuleSchema": "AXGATE-SCHEMA", "RuleSemantic": "AXGATE-SEMANTIC",
		"RuleActionType": "AXAG-LINT-004", "RuleRiskLevel": "AXAG-LINT-005",
		"RuleRiskConfirmation": "AXAG-LINT-006", "RuleMutationIdempotent": "AXAG-LINT-007",
		"RuleParamOverlap": "AXAG-LINT-008", "RuleScopeMissing": "AXAG-LINT-011",
		"RuleApprovalRoles": "AXAG-LINT-012", "RuleLevelField": "AXGATE-LEVEL-001",
		"RuleLevelUndeclared": "AXGATE-LEVEL-002", "RulePrecondUnproduced": "AXGATE-PRECOND-001",
		"RulePrecondCycle": "AXGATE-PRECOND-002", "RuleConstraintOptional": "AXGATE-CEL-001",
		"RuleConstraintCost": "AXGATE-CEL-002",
	} {
		literals[manifestPkg+"."+name] = literal{value: v}
	}
	removed[manifestPkg+".DefaultMaxManifestBytes"] = "removed: a manifest document is at most 16 MiB (manifest.Load)"
	removed[manifestPkg+".SchemaJSON"] = "removed: the schema is manifest/schema/manifest.schema.json in the repository"
	removed[manifestPkg+".ManifestID"] = "removed: the grade report carries the id (LintResult.Report)"
}

func init() {
	removed[modulePath+"/errors.Aggregate"] = "removed: axerr.AggregateOmitted(intent, violations, 0)"
}

func init() {
	for _, n := range []string{"Client", "Counter", "Dial", "EnvURL", "Prefix", "Server", "StartServer", "URL"} {
		removed[redisstore+"/redistest."+n] = "removed: redistest was the test helper of redisstore's own tests; it is internal now"
	}
}

func init() {
	// The adapters' shared conventions moved to an internal package: the
	// header names and _meta keys are wire strings, the functions the
	// adapters' own business.
	const wire = modulePath + "/adapters/wire"
	for name, v := range map[string]string{
		"HeaderConfirmation": "X-AXAG-Confirmation", "HeaderApproval": "X-AXAG-Approval",
		"HeaderIdempotencyKey": "Idempotency-Key", "HeaderTenant": "X-AXAG-Tenant",
		"MetaConfirmation": "axag/confirmation", "MetaApprovals": "axag/approvals",
		"MetaIdempotencyKey": "axag/idempotency_key", "MetaTenant": "axag/tenant",
	} {
		literals[wire+"."+name] = literal{value: v}
	}
	for _, n := range []string{"FromHeader", "FromMeta", "Header", "Merge", "MetaCarrier", "SplitList", "ToMeta"} {
		removed[wire+"."+n] = "removed: the adapters read and write credentials themselves (httpgate, mcpgate, mcpgo)"
	}
}

func init() {
	// Lint and grade left the manifest package: the CLI is their interface.
	for _, n := range []string{
		"Lint", "LintFile", "LintOptions", "LintResult", "Finding", "ActionStatus", "PruneError",
		"Rule", "Rules", "Severity", "SeverityError", "SeverityWarning",
		"Level", "LevelBasic", "LevelIntermediate", "LevelFull", "ParseLevel",
		"GradeReport", "Quality", "Criterion", "Deterministic", "Status", "StatusPass", "StatusFail",
		"ValidatorVersion",
	} {
		removed[manifestPkg+"."+n] = "removed: lint and grade a manifest with the CLI, axgate lint (--format json: the grade report with its findings)"
	}
}
