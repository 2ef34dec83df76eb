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
package manifest
