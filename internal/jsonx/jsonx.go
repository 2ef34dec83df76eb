// Package jsonx decodes untrusted JSON strictly: it refuses invalid UTF-8,
// nesting deeper than a limit, input over a size limit and objects that
// repeat a key, which encoding/json would otherwise accept silently (the last
// duplicate wins, invalid bytes become U+FFFD).
//
// The common case stays as fast as encoding/json: one linear scan counts the
// object members and the nesting depth, json.Unmarshal decodes, and the number
// of keys it kept is compared with the number of members scanned. Only when
// they differ — a duplicate key — does a slower token walk run, to name the
// duplicate's path.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound what Decode accepts.
type Limits struct {
	// MaxBytes is the largest input accepted; 0 means no limit.
	MaxBytes int
	// MaxDepth is the deepest nesting of objects and arrays; 0 means no limit.
	MaxDepth int
}

// Kind says what was wrong with the input.
type Kind int

// The kinds of Error.
const (
	Syntax Kind = iota
	TooLarge
	TooDeep
	BadUTF8
	DuplicateKey
)

// Error describes input Decode refused.
type Error struct {
	Kind Kind
	// Path is a JSON Pointer to the offending member, when known.
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Decode parses data into the values encoding/json produces for an any
// (map[string]any, []any, float64, string, bool, nil).
func Decode(data []byte, lim Limits) (any, error) {
	if lim.MaxBytes > 0 && len(data) > lim.MaxBytes {
		return nil, &Error{Kind: TooLarge, Msg: fmt.Sprintf("input is %d bytes, over the limit of %d", len(data), lim.MaxBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &Error{Kind: BadUTF8, Msg: "input is not valid UTF-8"}
	}
	members, err := scan(data, lim.MaxDepth)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, &Error{Kind: Syntax, Msg: syntaxMessage(err)}
	}
	if members != countKeys(v) {
		if path, key := findDuplicate(data); key != "" {
			return nil, &Error{Kind: DuplicateKey, Path: path, Msg: fmt.Sprintf("duplicate key %q at %q", key, path)}
		}
		return nil, &Error{Kind: DuplicateKey, Msg: "duplicate key"}
	}
	return v, nil
}

// scan counts the members of all objects (one ':' outside strings each) and
// checks the nesting depth. It does not validate syntax: json.Unmarshal does.
func scan(data []byte, maxDepth int) (members int, err error) {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Skip the string, honouring backslash escapes.
			for i++; i < len(data); i++ {
				if data[i] == '\\' {
					i++
				} else if data[i] == '"' {
					break
				}
			}
		case '{', '[':
			depth++
			if maxDepth > 0 && depth > maxDepth {
				return 0, &Error{Kind: TooDeep, Msg: fmt.Sprintf("nesting is deeper than the limit of %d", maxDepth)}
			}
		case '}', ']':
			depth--
		case ':':
			members++
		}
	}
	return members, nil
}

func countKeys(v any) int {
	switch t := v.(type) {
	case map[string]any:
		n := len(t)
		for _, e := range t {
			n += countKeys(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range t {
			n += countKeys(e)
		}
		return n
	}
	return 0
}

// findDuplicate walks the tokens of valid JSON and returns the path of the
// first repeated key and the key itself.
func findDuplicate(data []byte) (string, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		keys   map[string]struct{}
		index  int
		key    string
		expect bool // object: the next string token is a key
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			b.WriteByte('/')
			if f.object {
				b.WriteString(EscapePointer(f.key))
			} else {
				b.WriteString(strconv.Itoa(f.index))
			}
		}
		return b.String()
	}
	// afterValue moves the enclosing container to its next slot.
	afterValue := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.object {
			top.expect = true
		} else {
			top.index++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				afterValue()
				continue
			}
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				top.key = key
				return path(), key
			}
			top.keys[key] = struct{}{}
			top.key = key
			top.expect = false
			continue
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, &frame{object: true, keys: map[string]struct{}{}, expect: true})
			case '[':
				stack = append(stack, &frame{})
			case ']', '}':
				stack = stack[:len(stack)-1]
				afterValue()
			}
		default:
			afterValue()
		}
	}
}

func syntaxMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return ue.Error()
	}
	return err.Error()
}

// EscapePointer escapes one reference token of a JSON Pointer (RFC 6901).
func EscapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// UnescapePointer reverses EscapePointer.
func UnescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// Resolve returns the value at the JSON Pointer ptr inside v, and whether it
// exists.
func Resolve(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = UnescapePointer(tok)
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}
