package mcpgate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolDigest returns the pin of an MCP tool's definition.
//
// The pin is the lowercase hex SHA-256 of the RFC 8785 (JCS) canonical JSON
// of the object
//
//	{"name": …, "description": …, "inputSchema": …, "annotations": …}
//
// A manifest action stores it as upstream_sha256 (manifest.Action.UpstreamSHA256)
// and a gateway compares it with the digest of the tool the upstream lists,
// so that an upstream server cannot change what a reviewed tool does or says
// (a "rug pull") without the operator noticing: the description steers the
// model, the schema says what the tool accepts, the annotations what it
// claims about itself.
//
// The digest depends on the definition only, not on how it was written: key
// order, whitespace, number spelling and string escapes do not change it
// (JCS). To be the same whether the tool was built by a server or decoded by
// a client:
//
//   - description is left out when it is empty (the SDK cannot tell an
//     empty description from an absent one), never written as null;
//   - annotations are left out when the tool has none (nil). When present,
//     readOnlyHint and idempotentHint are always written (booleans the SDK
//     decodes an absent hint to false), destructiveHint and openWorldHint
//     only when set (their absence means the specification's default, which
//     differs from false), title only when not empty. They are written from
//     the fields, not with the SDK's JSON encoding, which MCPGODEBUG can
//     change;
//   - inputSchema is the JSON encoding of the value the tool holds (a map
//     from a client, any JSON-marshalling value on a server), null when it
//     holds none;
//   - the title, output schema, icons and _meta of the tool are not part of
//     the digest: they neither reach the model as instructions nor change
//     what the tool accepts, and the pin should not break when a server
//     adds an icon.
//
// It fails for a nil tool, a tool without a name, or an input schema that
// does not encode as JSON.
func ToolDigest(t *mcp.Tool) (string, error) {
	canon, err := toolCanonical(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// toolCanonical returns the JCS form of the part of t that ToolDigest pins.
func toolCanonical(t *mcp.Tool) ([]byte, error) {
	if t == nil {
		return nil, errors.New("mcpgate: ToolDigest of a nil tool")
	}
	if t.Name == "" {
		return nil, errors.New("mcpgate: ToolDigest of a tool without a name")
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: the input schema of tool %q does not encode as JSON: %w", t.Name, err)
	}
	doc := map[string]any{"name": t.Name, "inputSchema": json.RawMessage(schema)}
	if t.Description != "" {
		doc["description"] = t.Description
	}
	if a := t.Annotations; a != nil {
		ann := map[string]any{"readOnlyHint": a.ReadOnlyHint, "idempotentHint": a.IdempotentHint}
		if a.DestructiveHint != nil {
			ann["destructiveHint"] = *a.DestructiveHint
		}
		if a.OpenWorldHint != nil {
			ann["openWorldHint"] = *a.OpenWorldHint
		}
		if a.Title != "" {
			ann["title"] = a.Title
		}
		doc["annotations"] = ann
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: the definition of tool %q does not encode as JSON: %w", t.Name, err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: the definition of tool %q has no canonical JSON form: %w", t.Name, err)
	}
	return canon, nil
}
