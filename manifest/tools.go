package manifest

// Tool is an action as agents see it: the definition a tool server lists.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	// Safety is the AXAG safety block of the action.
	Safety Safety `json:"axag"`
}

// Safety is what an agent (and its user) should know about an action before
// calling it.
type Safety struct {
	Intent               string   `json:"intent"`
	ActionType           string   `json:"action_type"`
	RiskLevel            string   `json:"risk_level,omitempty"`
	ConfirmationRequired bool     `json:"confirmation_required"`
	ApprovalRequired     bool     `json:"approval_required"`
	ApprovalRoles        []string `json:"approval_roles,omitempty"`
	ApprovalCount        int      `json:"approval_count,omitempty"`
	RequiredRoles        []string `json:"required_roles,omitempty"`
	Idempotent           *bool    `json:"idempotent,omitempty"`
	Scope                string   `json:"scope,omitempty"`
	RateLimit            string   `json:"rate_limit,omitempty"`
	Cooldown             string   `json:"cooldown,omitempty"`
	SideEffects          []string `json:"side_effects,omitempty"`
	Preconditions        []string `json:"preconditions,omitempty"`
	Postconditions       []string `json:"postconditions,omitempty"`
	Async                bool     `json:"async,omitempty"`
}

// Annotations are the MCP tool annotations derived from an action.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// MCPTool is an entry of an MCP tools/list result. The AXAG safety block
// travels in _meta under "axag/safety".
type MCPTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Annotations Annotations    `json:"annotations"`
	Meta        map[string]any `json:"_meta,omitempty"`
}

// Tool returns the action's tool definition. An action without declared
// parameters gets the open object schema {"type":"object"}, since MCP and
// the model providers require an input schema.
func (a *Action) Tool() Tool {
	in := a.inputSchema
	if in == nil {
		in = map[string]any{"type": "object"}
	}
	return Tool{Name: a.toolName, Description: a.Description, InputSchema: in, Safety: a.Safety()}
}

// Safety returns the action's AXAG safety block.
func (a *Action) Safety() Safety {
	s := Safety{
		Intent:               a.Intent,
		ActionType:           string(a.Type),
		RiskLevel:            string(a.RiskLevel),
		ConfirmationRequired: a.ConfirmationRequired,
		ApprovalRequired:     a.ApprovalRequired,
		ApprovalRoles:        a.ApprovalRoles,
		RequiredRoles:        a.RequiredRoles,
		Idempotent:           a.Idempotent,
		Scope:                string(a.Scope),
		SideEffects:          a.SideEffects,
		Preconditions:        a.Preconditions,
		Postconditions:       a.Postconditions,
		Async:                a.Async,
	}
	if a.ApprovalRequired {
		s.ApprovalCount = a.ApprovalCount
	}
	if a.RateLimit != nil {
		s.RateLimit = a.RateLimit.Spec
	}
	if a.Cooldown > 0 {
		s.Cooldown = a.Cooldown.String()
	}
	return s
}

// Annotations derives the MCP hints: read-only for read and navigate actions;
// destructive for deletes and for writes of high or critical risk; idempotent
// for reads and for actions the manifest declares idempotent.
func (a *Action) Annotations() Annotations {
	ro := a.Type == Read || a.Type == Navigate
	return Annotations{
		ReadOnlyHint:    ro,
		DestructiveHint: !ro && (a.Type == Delete || a.RiskLevel.AtLeast(RiskHigh)),
		IdempotentHint:  ro || a.IsIdempotent(),
		OpenWorldHint:   false,
	}
}

// MCPTool renders the action as an MCP tools/list entry.
func (a *Action) MCPTool() MCPTool {
	t := a.Tool()
	return MCPTool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: a.Annotations(),
		Meta:        map[string]any{"axag/safety": t.Safety},
	}
}

// Tools returns the tool definitions of every action, in manifest order.
func (m *Manifest) Tools() []Tool {
	out := make([]Tool, len(m.Actions))
	for i, a := range m.Actions {
		out[i] = a.Tool()
	}
	return out
}

// MCPTools returns every action as an MCP tools/list entry.
func (m *Manifest) MCPTools() []MCPTool {
	out := make([]MCPTool, len(m.Actions))
	for i, a := range m.Actions {
		out[i] = a.MCPTool()
	}
	return out
}
