// Package manifest reads AXAG manifests and turns them into the model the gates enforce.
//
// A manifest is the semantic contract of a site's actions.
//
// Both forms the AXAG documentation publishes are accepted and normalized into
// one model: the v1 schema form (top-level actions with required_parameters
// and optional_parameters lists) and the reference form (entities, each with
// actions whose parameters are a map from name to definition). JSON and YAML
// are both read.
//
// Loading is strict on purpose. An unknown field is an error naming its JSON
// Pointer path, because a misspelled safety field ("confirmation_requried")
// must never silently switch a gate off. Every problem found is reported at
// once, each with its path, and a manifest with any error is never returned.
//
// At load each action's parameters are compiled once into a JSON Schema
// (draft-07, formats asserted, unknown parameters refused) that the parameter
// gate validates arguments against.
//
// An MCP gateway in front of another server also reads two axgate
// extensions: resources (Resource: an exact URI, an RFC 6570 level 1 URI
// template or a URI prefix) and prompts (Prompt: a name), top-level lists
// in the v1 form and lists of each entity in the reference form. Each
// carries the access fields of an action and stands for a read action the
// gates check (Manifest.Checked), which is never a tool; the gateway serves
// no resource or prompt the manifest does not declare.
//
// Linting and grading a manifest (the AXAG lint rules, conformance levels,
// the quality score) is the CLI's: axgate lint, whose JSON output
// (--format json) is the machine-readable form.
package manifest
