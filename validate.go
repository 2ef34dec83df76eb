package axgate

import (
	"encoding/json"
	"net/http"

	"github.com/axgate/axgate/middleware"
)

// ValidationError is one entry of a validation result: where, what, and which
// JSON Schema keyword failed.
type ValidationError struct {
	// Path is a JSON Pointer to the offending field; "" for the root.
	Path string `json:"path"`
	// Message is the validator's own message.
	Message string `json:"message"`
	// Keyword is the failing JSON Schema keyword.
	Keyword string `json:"keyword,omitempty"`
}

// ValidationResult is the answer of the Tool Validation API.
//
// It marshals to {"valid":true} (no errors key at all),
// {"valid":false,"errors":[…]}, or, for an unknown tool,
// {"error":"Tool not found: NAME"}. Errors lists at most the enforcer's cap
// (WithMaxViolations, default 20); ErrorsOmitted, rendered as
// "errors_omitted" only when positive, counts the others.
type ValidationResult struct {
	Valid  bool              `json:"valid"`
	Errors []ValidationError `json:"errors,omitempty"`
	// ErrorsOmitted is how many more violations were found than Errors
	// lists.
	ErrorsOmitted int `json:"errors_omitted,omitempty"`

	status   int
	notFound string
}

// Status is the HTTP status of the result: 200 whenever schema validation
// ran (valid or not), 400 for a body that is not JSON, 404 for an unknown
// tool.
func (r ValidationResult) Status() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// NotFound reports whether the tool does not exist.
func (r ValidationResult) NotFound() bool { return r.notFound != "" }

// MarshalJSON renders the wire format of the Tool Validation API.
func (r ValidationResult) MarshalJSON() ([]byte, error) {
	if r.notFound != "" {
		return json.Marshal(struct {
			Error string `json:"error"`
		}{"Tool not found: " + r.notFound})
	}
	type plain ValidationResult
	return json.Marshal(plain(r))
}

// Validate checks a request body against a tool's input schema without invoking anything.
//
// It consults no authentication and answers exactly as the Tool Validation
// API specifies: unknown tool → 404; a body that is not JSON → 400 with one
// error at path "" and keyword "format"; otherwise 200 with the violations
// the validator reports, in path order, at most as many as the cap
// (WithMaxViolations) with the count of the others in ErrorsOmitted: the
// endpoint needs no authentication, so neither its answer nor its work may
// grow with what a caller sends. A tool without an input schema is always
// valid.
func (e *Enforcer) Validate(tool string, body []byte) ValidationResult {
	a := e.m.Tool(tool)
	if a == nil {
		return ValidationResult{status: http.StatusNotFound, notFound: tool}
	}
	v, err := e.cfg.limits.Decode(body)
	if err != nil {
		// A body the call would refuse before any gate (not JSON, or JSON
		// outside the I-JSON profile: a number a double does not hold, keys
		// equal under case folding, too many members) is a 400. Where the
		// decoder names the place, the error says where and why (keyword
		// i-json, maxProperties), so an agent can fix that one value.
		r := ValidationResult{status: http.StatusBadRequest, Errors: []ValidationError{{Path: "", Message: "Invalid JSON: " + err.Error(), Keyword: "format"}}}
		if de := middleware.DecodeError(err); len(de.Violations) > 0 {
			x := de.Violations[0]
			r.Errors[0] = ValidationError{Path: x.Path, Message: de.Message, Keyword: x.Keyword}
		}
		return r
	}
	// a comes from the enforced manifest, so the gate has its schema.
	vs, omitted, _ := e.params.Violations(a, v)
	if len(vs) == 0 {
		return ValidationResult{Valid: true}
	}
	r := ValidationResult{Errors: make([]ValidationError, len(vs)), ErrorsOmitted: omitted}
	for i, x := range vs {
		r.Errors[i] = ValidationError{Path: x.Path, Message: x.Message, Keyword: x.Keyword}
	}
	return r
}
