package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gowebpki/jcs"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
)

// Default limits on the arguments of a call.
const (
	DefaultMaxArgBytes   = 1 << 20
	defaultMaxArgDepth   = 64
	defaultMaxArgMembers = 1000
	defaultMaxArgItems   = 10000
)

// Limits bound the arguments a call may carry.
type Limits struct {
	// MaxBytes is the largest argument document; 0 means DefaultMaxArgBytes.
	MaxBytes int
	// MaxDepth is the deepest nesting; 0 means 64.
	MaxDepth int
	// MaxMembers is the most members one object of the arguments may have,
	// at any depth; 0 means 1,000. It is checked while the
	// bytes are scanned, before anything is decoded or validated, so a wide
	// object costs one pass over its bytes.
	MaxMembers int
	// MaxItems is the most items one array of the arguments may have, at
	// any depth; 0 means 10,000. Like MaxMembers it is checked
	// while the bytes are scanned, before anything is decoded: a megabyte of
	// one-byte items would otherwise decode to hundreds of megabytes.
	MaxItems int
}

// Resolved returns l with zero fields replaced by the defaults.
func (l Limits) Resolved() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxArgBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = defaultMaxArgDepth
	}
	if l.MaxMembers == 0 {
		l.MaxMembers = defaultMaxArgMembers
	}
	if l.MaxItems == 0 {
		l.MaxItems = defaultMaxArgItems
	}
	return l
}

// Or returns l with each zero field taken from d: a transport that bounds
// one thing itself (httpgate's body depth) keeps the enforcer's other
// limits, rather than falling back to the defaults for them.
func (l Limits) Or(d Limits) Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxMembers == 0 {
		l.MaxMembers = d.MaxMembers
	}
	if l.MaxItems == 0 {
		l.MaxItems = d.MaxItems
	}
	return l
}

// Decode parses untrusted JSON within the limits, as for call arguments.
//
// Size, depth, members per object, items per array and UTF-8 are checked, and
// only I-JSON (RFC 7493) is accepted — no repeated key, no two keys of one
// object equal under Unicode simple case folding, no number that an IEEE 754
// double does not hold exactly, no escaped lone surrogate — so that what a
// gate checks is what any decoder downstream reads. Its errors are for
// DecodeError.
func (l Limits) Decode(data []byte) (any, error) {
	l = l.Resolved()
	return jsonx.Decode(data, jsonx.Limits{MaxBytes: l.MaxBytes, MaxDepth: l.MaxDepth, MaxMembers: l.MaxMembers, MaxItems: l.MaxItems, IJSON: true})
}

// Principal is who makes the call: always taken from the transport's
// authentication, never from the arguments.
type Principal struct {
	// ID identifies the person (or service) on whose behalf the agent acts.
	ID string
	// Tenant is the caller's tenant, empty when the caller has none.
	Tenant string
	// Roles the caller holds.
	Roles []string
	// Scopes granted to the caller (OAuth-style); nil means the credential
	// carried no scope claim, which is not the same as an empty grant.
	Scopes []string
	// Claims are the raw claims of the caller's credential.
	Claims map[string]any
}

// HasRole reports whether the principal holds any of the roles.
func (p Principal) HasRole(roles ...string) bool {
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// Credentials are what a call presents beyond the caller's identity.
type Credentials struct {
	// Confirmation is a confirmation token (a JWT).
	Confirmation string
	// Approvals are approval tokens (JWTs), one per approver.
	Approvals []string
	// IdempotencyKey is the caller's key for a non-idempotent call.
	IdempotencyKey string
	// ClaimedTenant is a tenant the request claims to act in (for example the
	// X-AXAG-Tenant header); it must match the principal's.
	ClaimedTenant string
}

// Facts are what the gates learned about a call, for the audit record and
// the trace.
type Facts struct {
	ConfirmationJTI      string
	ConfirmationElicited bool
	// ConfirmationRequestID is the confirmation request whose decision
	// (the person confirmed on the decision page, axgate.WithDecisionPages)
	// the call ran on, without a token.
	ConfirmationRequestID string
	Approvers             []string
	ApprovalRequestID     string
	// Replayed is true when the idempotency gate answered with a stored result.
	Replayed bool
	// Warnings are things a gate let pass but wants recorded (an unbound
	// precondition, a duplicate call).
	Warnings []string
	// ShadowRefusals are the refusals that shadow mode let pass (the root
	// package's WithShadow), in the order the gates made them: the call ran
	// although each of them would have refused it.
	ShadowRefusals []*axerr.Error
}

// Result is what a tool returned.
type Result struct {
	// Value is the tool's output. It must marshal to JSON.
	Value any
}

// Commit is work a gate defers until every pre-execution gate has allowed the
// call, such as marking a token used.
type Commit func(ctx context.Context) error

// Call is one tool call on its way through the chain. A Call is used by one
// goroutine at a time and must not be reused for another call.
type Call struct {
	// Tool is the tool name the caller asked for.
	Tool string
	// ID is the transport's id of this call, when it has one.
	ID string
	// Arguments is the argument object as raw JSON.
	Arguments json.RawMessage
	// Principal is the authenticated caller.
	Principal Principal
	// Scope names where the call is served beyond its tool, for the
	// decisions held for it: a confirmation or approval request held
	// (axgate.WithDecisionPages) for a call of one scope is never the
	// request of the same call in another. A gateway with several
	// upstreams sets it to the upstream's name, so that enforcers sharing
	// an approval store keep each upstream's decisions apart. "" for none.
	Scope string
	// Credentials presented with the call.
	Credentials Credentials
	// Action is the manifest action the tool resolves to; the intent gate
	// sets it when it is nil.
	Action *manifest.Action
	// Limits bound the arguments; zero values mean the defaults.
	Limits Limits
	// Facts gathered by the gates.
	Facts Facts
	// Elicit, when the transport can ask the person inline (MCP
	// elicitation), asks for confirmation of this call with message and
	// reports whether the person accepted. Nil means the transport cannot
	// ask, and a confirmation token is needed instead.
	Elicit func(ctx context.Context, message string) (accepted bool, err error)

	decoded  bool
	value    any
	valueErr *axerr.Error
	digest   string
	canon    []byte

	commits []Commit
	// commitRuns counts the RunCommits of the call.
	commitRuns int
	checkOnly  bool
	executed   bool

	// pending is set while a stage of an observed chain runs and has not
	// passed the call on yet: pendingStage, which began at pendingStart
	// (zero when the chain does not time its stages).
	pending      bool
	pendingStage string
	pendingStart time.Time

	// telemetry is the Telemetry stage's state while it traces this call
	// (otel.go), so that the observer finds the span without a ctx.Value.
	telemetry *callTelemetry
}

// NewCall returns a call of a tool with raw JSON arguments.
func NewCall(tool string, args json.RawMessage, p Principal) *Call {
	return &Call{Tool: tool, Arguments: args, Principal: p}
}

// Intent returns the resolved action's intent, or "" before resolution.
func (c *Call) Intent() string {
	if c.Action == nil {
		return ""
	}
	return c.Action.Intent
}

// Value returns the decoded argument document, decoding it on first use.
// Empty arguments (or JSON null) decode to an empty object. Arguments over the
// size limit, not UTF-8, nested too deeply, with a repeated key or that are not
// JSON give an *axerr.Error.
func (c *Call) Value() (any, error) {
	if !c.decoded {
		c.decode()
	}
	if c.valueErr != nil {
		return nil, c.valueErr
	}
	return c.value, nil
}

// Args returns the decoded arguments as an object. Arguments that are not a
// JSON object give an *axerr.Error.
func (c *Call) Args() (map[string]any, error) {
	v, err := c.Value()
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, axerr.Newf(axerr.CodeInvalidArguments, "arguments must be a JSON object, not %s", kindOf(v)).WithIntent(c.Intent())
	}
	return m, nil
}

func (c *Call) decode() {
	c.decoded = true
	if isEmptyArgs(c.Arguments) {
		c.value = map[string]any{}
		return
	}
	raw := c.Arguments
	v, err := c.Limits.Decode(raw)
	if err == nil {
		if v == nil {
			v = map[string]any{}
		}
		c.value = v
		return
	}
	c.valueErr = DecodeError(err).WithIntent(c.Intent())
}

// isEmptyArgs reports whether raw arguments mean "no arguments": nothing,
// blanks, or JSON null. They decode and hash as {}.
func isEmptyArgs(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// DecodeError turns an error of the strict JSON decoder into the *Error a caller sees.
//
// It is 413 for size, 400 for everything else. A number that is not
// interoperable is AXAG_INVALID_TYPE with reason number_not_interoperable;
// keys equal under case folding are reason ambiguous_keys, an object with
// too many members reason too_many_members, an array with too many items
// reason too_many_items and an escaped lone surrogate reason invalid_string,
// all AXGATE_INVALID_ARGUMENTS (the member and item limits are shape limits
// like the depth, not sizes).
func DecodeError(err error) *axerr.Error {
	je, ok := err.(*jsonx.Error)
	if !ok {
		return axerr.New(axerr.CodeInvalidArguments, "arguments are not valid JSON: "+err.Error())
	}
	switch je.Kind {
	case jsonx.TooLarge:
		return axerr.New(axerr.CodePayloadTooLarge, "arguments are too large: "+je.Msg)
	case jsonx.DuplicateKey:
		e := axerr.New(axerr.CodeInvalidArguments, "arguments repeat a key: "+je.Msg)
		if je.Path != "" {
			e.Violations = []axerr.Violation{{Path: je.Path, Message: "duplicate key", Keyword: "duplicate", Code: axerr.CodeInvalidArguments}}
		}
		return e
	}
	if r, ok := ijsonRefusals[je.Kind]; ok {
		e := axerr.New(r.code, r.message+je.Msg).WithReason(r.reason).WithSuggestion(r.suggestion)
		e.Violations = []axerr.Violation{{Path: je.Path, Message: r.violation, Keyword: r.keyword, Code: r.code}}
		return e
	}
	return axerr.New(axerr.CodeInvalidArguments, "arguments are not valid JSON: "+je.Msg)
}

// ijsonRefusal is how DecodeError words one kind of input outside the
// I-JSON profile or the shape limits.
type ijsonRefusal struct {
	code                           axerr.Code
	reason                         axerr.Reason
	message, suggestion, violation string
	keyword                        string
}

// ijsonRefusals are the refusals of arguments that are JSON but that
// decoders downstream could read otherwise, or that are too wide: each
// names the place (a violation with the path) and the reason.
var ijsonRefusals = map[jsonx.Kind]ijsonRefusal{
	jsonx.NumberNotInteroperable: {
		code: axerr.CodeInvalidType, reason: reasons.NumberNotInteroperable, keyword: "i-json",
		message:    "arguments hold a number that other programs may read as a different value: ",
		suggestion: "Send large ids and exact decimals as JSON strings: numbers must be integers of magnitude at most 2^53-1 (9007199254740991) or decimals written as the shortest text of an IEEE 754 double (RFC 7493 I-JSON).",
		violation:  "number is not exactly representable as an IEEE 754 double",
	},
	jsonx.AmbiguousKeys: {
		code: axerr.CodeInvalidArguments, reason: reasons.AmbiguousKeys, keyword: "i-json",
		message:    "arguments have two keys that are equal under case folding, which decoders read differently: ",
		suggestion: "Give each key of an object once, in one spelling; keys may not differ only in letter case.",
		violation:  "key is equal to another key of its object under case folding",
	},
	jsonx.TooManyMembers: {
		code: axerr.CodeInvalidArguments, reason: reasons.TooManyMembers, keyword: "maxProperties",
		message:    "arguments have an object with too many members: ",
		suggestion: "Send fewer members in one object; put many items in an array or split the call.",
		violation:  "object has too many members",
	},
	jsonx.TooManyItems: {
		code: axerr.CodeInvalidArguments, reason: reasons.TooManyItems, keyword: "maxItems",
		message:    "arguments have an array with too many items: ",
		suggestion: "Send fewer items in one array; split the call into several.",
		violation:  "array has too many items",
	},
	jsonx.LoneSurrogate: {
		code: axerr.CodeInvalidArguments, reason: reasons.InvalidString, keyword: "i-json",
		message:    "arguments hold a string that is not valid Unicode, which decoders read differently: ",
		suggestion: "Escape characters outside the Basic Multilingual Plane as a high and low surrogate pair (\\ud83d\\ude00), or send them as UTF-8; never half a pair.",
		violation:  "string escapes a lone UTF-16 surrogate",
	},
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// ArgsSHA256 returns the base64url (unpadded) SHA-256 of the arguments
// canonicalized with RFC 8785 (JCS): the value tokens bind a call to. Key
// order, whitespace and number spelling do not change it. It is computed once
// per call, over the bytes CanonicalArguments returns.
func (c *Call) ArgsSHA256() (string, error) {
	if c.digest != "" {
		return c.digest, nil
	}
	canon, err := c.CanonicalArguments()
	if err != nil {
		return "", err
	}
	c.digest = DigestCanonical(canon)
	return c.digest, nil
}

// CanonicalArguments returns the arguments canonicalized with RFC 8785 (JCS), empty ones as {}.
//
// They are the bytes ArgsSHA256 digests, and the bytes an adapter hands the
// tool, so that what a token binds and what the tool reads are one encoding
// of the value the gates checked. Arguments the gates would refuse (not an
// object, a repeated key, …) give the same *axerr.Error as Args. It is
// computed once per call and shared: the caller must not modify the
// returned slice.
func (c *Call) CanonicalArguments() ([]byte, error) {
	if c.canon != nil {
		return c.canon, nil
	}
	if _, err := c.Args(); err != nil {
		return nil, err
	}
	raw := []byte(c.Arguments)
	if isEmptyArgs(raw) {
		raw = []byte("{}")
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, axerr.New(axerr.CodeInvalidArguments, "arguments cannot be canonicalized: "+err.Error())
	}
	c.canon = canon
	return canon, nil
}

// DigestCanonical returns the base64url (unpadded) SHA-256 of canonical bytes.
func DigestCanonical(canon []byte) string {
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// OnCommit registers work to run once every pre-execution gate has allowed
// the call, right before the tool runs. Commits do not run for a check-only
// call.
func (c *Call) OnCommit(f Commit) { c.commits = append(c.commits, f) }

// RunCommits runs the registered commits in order and stops at the first
// error. The commit stage of the standard chain calls it.
func (c *Call) RunCommits(ctx context.Context) error {
	// Take the list first: if a commit fails and the chain runs again on
	// this call (a retry stage), the old commits must not run beside the
	// new ones.
	fs := c.commits
	c.commits = nil
	c.commitRuns++
	for _, f := range fs {
		if err := f(ctx); err != nil {
			return err
		}
	}
	return nil
}

// CheckOnly reports whether the call is being checked without being run
// (Enforcer.Check): stateful gates must then look without recording.
func (c *Call) CheckOnly() bool { return c.checkOnly }

// SetCheckOnly marks the call as checked without being run. Enforcer.Check
// sets it; the commit stage refuses a check-only call, so that a call marked
// this way can never reach the tool without its tokens spent.
func (c *Call) SetCheckOnly(v bool) { c.checkOnly = v }

// MarkExecuted records that the tool was invoked for this call. The standard
// chain marks it right before the tool runs.
func (c *Call) MarkExecuted() { c.executed = true }

// Executed reports whether the tool was invoked for this call, whatever it
// returned: a gate that undoes its own work on failure (an idempotency claim)
// must not undo it once the tool has run.
func (c *Call) Executed() bool { return c.executed }

// clearPending forgets the pending stage: its outcome was reported.
func (c *Call) clearPending() {
	c.pending, c.pendingStage, c.pendingStart = false, "", time.Time{}
}
