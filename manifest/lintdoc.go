package manifest

import "github.com/axgate/axgate/internal/manifestdoc"

func init() {
	manifestdoc.Inspect = inspect
	manifestdoc.ReadLimited = readLimited
	manifestdoc.PointerLess = pointerLess
}

// inspect is manifestdoc.Inspect: the linter reports on a document that does
// not load, from the model of what could be read.
func inspect(data []byte, source string) (doc any, m any, err error) {
	format := formatFor(source)
	model, err := parse(data, source, format)
	doc, _ = decodeDocument(data, format)
	if root, ok := doc.(map[string]any); ok && model == nil {
		model = bestEffort(root)
	}
	if model == nil {
		return doc, nil, err
	}
	return doc, model, err
}

// bestEffort builds the model of a document that failed to load, so that the
// lint rules and the score still say something useful about it. A panic here
// would be a defect in the builder on malformed input; lint then reports
// what the loader found and nothing more.
func bestEffort(root map[string]any) (m *Manifest) {
	defer func() {
		if recover() != nil {
			m = nil
		}
	}()
	m, _ = build(root)
	return m
}
