package manifest

import (
	"encoding/json"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Form says which of the two published shapes a manifest was written in.
type Form string

// The two forms.
const (
	FormV1        Form = "v1"        // top-level actions[], parameter lists
	FormReference Form = "reference" // entities[].actions[], parameter maps
)

// ActionType is what an action does to its entity.
type ActionType string

// The action types of AXAG.
const (
	Read     ActionType = "read"
	Write    ActionType = "write"
	Delete   ActionType = "delete"
	Navigate ActionType = "navigate"
)

// RiskLevel classifies how much harm an action can do.
type RiskLevel string

// Risk levels in increasing order.
const (
	RiskNone     RiskLevel = "none"
	RiskLow      RiskLevel = "low"
	RiskMedium   RiskLevel = "medium"
	RiskHigh     RiskLevel = "high"
	RiskCritical RiskLevel = "critical"
)

// Rank orders risk levels: none (and unset) 0 … critical 4.
func (r RiskLevel) Rank() int {
	switch r {
	case RiskLow:
		return 1
	case RiskMedium:
		return 2
	case RiskHigh:
		return 3
	case RiskCritical:
		return 4
	}
	return 0
}

// AtLeast reports whether r is as risky as min or more.
func (r RiskLevel) AtLeast(min RiskLevel) bool { return r.Rank() >= min.Rank() }

// Scope is the operational boundary of an action.
type Scope string

// Scopes of AXAG.
const (
	ScopeUser   Scope = "user"
	ScopeTenant Scope = "tenant"
	ScopeGlobal Scope = "global"
)

// TenantBoundary says how strictly tenant-scoped actions are fenced.
type TenantBoundary string

// Tenant boundaries; strict is the default.
const (
	TenantStrict  TenantBoundary = "strict"
	TenantRelaxed TenantBoundary = "relaxed"
)

// Manifest is a loaded, validated AXAG manifest.
type Manifest struct {
	Version     string
	GeneratedAt string
	Conformance string
	Source      *Source
	// Metadata is the reference form's free-form metadata object.
	Metadata map[string]any
	// Form is the shape the manifest was written in.
	Form Form
	// Actions in document order: the tools.
	Actions []*Action
	// Resources and Prompts are the MCP resources and prompts a gateway
	// may serve (an axgate extension), in document order. A gateway
	// refuses every other one.
	Resources []*Resource
	Prompts   []*Prompt

	byIntent map[string]*Action
	byTool   map[string]*Action
}

// Source says where a manifest was generated from.
type Source struct {
	URL         string   `json:"url,omitempty"`
	Paths       []string `json:"paths,omitempty"`
	Tool        string   `json:"tool,omitempty"`
	ToolVersion string   `json:"tool_version,omitempty"`
}

// Action is one operation an agent may call: an intent with its parameters
// and safety declarations.
type Action struct {
	Intent      string
	Entity      string
	Type        ActionType
	OperationID string
	Description string
	// Parameters in declaration order: required ones first in the v1 form,
	// by name in the reference form (a map has no order).
	Parameters []*Parameter
	// ParametersDeclared is false when the manifest says nothing about
	// parameters; such an action has no input schema and accepts any object.
	ParametersDeclared bool

	RiskLevel            RiskLevel
	ConfirmationRequired bool
	ConfirmationMessage  string
	ApprovalRequired     bool
	ApprovalRoles        []string
	// ApprovalCount is how many distinct approvers are needed (default 1).
	ApprovalCount int
	RequiredRoles []string
	// Idempotent is nil when the manifest does not say.
	Idempotent     *bool
	Scope          Scope
	TenantBoundary TenantBoundary
	// CrossTenant is nil when the manifest does not say.
	CrossTenant *bool
	RateLimit   *RateLimit
	Cooldown    time.Duration
	// Constraints are boolean expressions over the arguments, sorted by name.
	Constraints    []Constraint
	SideEffects    []string
	Preconditions  []string
	Postconditions []string
	// OutputSchema is the declared JSON Schema of the result, if any.
	OutputSchema json.RawMessage
	Async        bool

	// UpstreamSHA256 pins the definition of the upstream tool the action
	// stands for (a gateway in front of an MCP server): the lowercase hex
	// SHA-256 of its canonical definition (mcpgate.ToolDigest). Empty when
	// the manifest does not pin it. A gateway refuses calls to a tool whose
	// definition no longer matches (AXGATE_TOOL_CHANGED).
	UpstreamSHA256 string
	// Upstream names the upstream of a gateway with several that serves
	// the action (an axgate extension, like UpstreamSHA256): a manifest
	// shared by several upstreams gives each the actions that name it
	// (Manifest.ForUpstream). Empty when the manifest does not say.
	Upstream string

	ElementSelector string
	SourceFile      string
	SourceLine      int

	// Pointer is the action's JSON Pointer in the source document.
	Pointer string

	toolName     string
	inputSchema  map[string]any
	paramSchema  *jsonschema.Schema
	outputSchema *jsonschema.Schema
}

// Parameter is one declared argument.
type Parameter struct {
	Name        string
	Type        string // string, number, integer, boolean, array, object
	Description string
	Required    bool
	Enum        []any
	Minimum     *float64
	Maximum     *float64
	MinLength   *int
	MaxLength   *int
	Pattern     string
	// Format is the JSON Schema format name (email, uri, date, date-time,
	// uuid, …); AXAG's hints url and datetime are normalized to uri and
	// date-time.
	Format     string
	Default    any
	HasDefault bool
	// MaxItems bounds the length of an array. Besides validating
	// arguments, it bounds the worst-case cost of constraints that iterate
	// over the array.
	MaxItems *int
	// Items describes array elements.
	Items *Parameter
	// Properties describes the members of an object, sorted by name.
	Properties []*Parameter
	// Pointer is the parameter's JSON Pointer in the source document.
	Pointer string
}

// RateLimit allows Count calls per Per.
type RateLimit struct {
	Count int
	Per   time.Duration
	// Spec is the text as written, e.g. "10/minute".
	Spec string
}

// Constraint is a named boolean expression over the arguments, such as
// "check_out > check_in".
type Constraint struct {
	Name string
	Expr string
	// Pointer is the constraint's JSON Pointer in the source document.
	Pointer string
}

// ToolName is the name agents call the action by: its operation_id, else its
// intent with "." replaced by "_".
func (a *Action) ToolName() string { return a.toolName }

// InputSchema returns the JSON Schema document compiled from the parameters,
// or nil when the action declares no parameters. Do not modify it.
func (a *Action) InputSchema() map[string]any { return a.inputSchema }

// ParamSchema returns the compiled parameter schema, or nil when the action
// declares no parameters.
func (a *Action) ParamSchema() *jsonschema.Schema { return a.paramSchema }

// CompiledOutputSchema returns the compiled output_schema, or nil.
func (a *Action) CompiledOutputSchema() *jsonschema.Schema { return a.outputSchema }

// IsIdempotent reports whether the manifest declares the action idempotent.
func (a *Action) IsIdempotent() bool { return a.Idempotent != nil && *a.Idempotent }

// StrictTenant reports whether every tenant-naming argument must name the
// caller's tenant: tenant_boundary strict (the default), or cross_tenant false.
func (a *Action) StrictTenant() bool {
	if a.CrossTenant != nil && !*a.CrossTenant {
		return true
	}
	return a.TenantBoundary != TenantRelaxed
}

// Param returns the top-level parameter with that name, or nil.
func (a *Action) Param(name string) *Parameter {
	for _, p := range a.Parameters {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Action returns the action with that intent, or nil.
func (m *Manifest) Action(intent string) *Action { return m.byIntent[intent] }

// Tool returns the action with that tool name, or nil.
func (m *Manifest) Tool(name string) *Action { return m.byTool[name] }
