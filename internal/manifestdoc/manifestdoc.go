// Package manifestdoc lets axgate's linter read a manifest document as
// package manifest does, without manifest exporting its parser's internals.
//
// Package manifest sets the functions in its init; internal/lint calls them.
package manifestdoc

import "io"

var (
	// Inspect parses data as manifest.Parse does, and returns the document too.
	//
	// It reads data as YAML when source ends in .yaml or .yml, as JSON when
	// it ends in .json. It returns the decoded document (nil when it is not
	// well-formed), the *manifest.Manifest (when the document does not
	// load, the model built from what could be read, or nil) and the error
	// of the load.
	Inspect func(data []byte, source string) (doc any, m any, err error)
	// ReadLimited reads a manifest document from r, refusing one larger
	// than manifest.Load accepts.
	ReadLimited func(r io.Reader) ([]byte, error)
	// PointerLess orders JSON Pointers as the load's problems are ordered
	// (array indices numerically).
	PointerLess func(a, b string) bool
)
