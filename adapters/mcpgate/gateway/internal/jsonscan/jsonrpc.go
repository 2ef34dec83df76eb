package jsonscan

import (
	"encoding/json"
	"strconv"
)

// IsRequestID reports whether raw is a JSON-RPC id the SDK takes: a string,
// or an integer.
func IsRequestID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		_, ok := String(raw)
		return ok
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// Response is the JSON-RPC response to id (its JSON) with raw, JSON, as
// its "result" or "error" (field).
func Response(id json.RawMessage, field string, raw []byte) []byte {
	out := make([]byte, 0, len(raw)+len(id)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"`...)
	out = append(out, field...)
	out = append(out, `":`...)
	out = append(out, raw...)
	return append(out, '}')
}
