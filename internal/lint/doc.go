// Package lint checks and grades AXAG manifests for axgate lint.
//
// Lint applies the AXAG lint rules as they apply to a manifest, the fields a
// conformance level requires and the graph of preconditions and
// postconditions, and never fails: everything wrong is a Finding with a rule
// id (Rules), a JSON Pointer and a fix. LintResult.Report is the grade
// report (status, grade, quality score). The rule ids, the findings' JSON
// and the grade report are the CLI's public output; the Go API is internal
// so that the manifest package is the model and its loading only.
package lint
