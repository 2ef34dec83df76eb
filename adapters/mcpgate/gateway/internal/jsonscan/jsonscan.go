package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Members calls fn with each member of the JSON object data. It returns
// false when data is not an object, a key has an escape or is not UTF-8, or
// fn returns false.
func Members(data []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for i < len(data) {
		if data[i] != '"' {
			return false
		}
		end := stringEnd(data, i)
		if end < 0 {
			return false
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			return false
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		vend := valueEnd(data, i)
		if vend < 0 || !fn(key, data[i:vend]) {
			return false
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
	return false
}

// Elements calls fn with each element of the JSON array data. It returns
// false when data is not an array or fn returns false.
func Elements(data []byte, fn func(value []byte) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return skipSpace(data, i+1) == len(data)
	}
	for i < len(data) {
		vend := valueEnd(data, i)
		if vend < 0 || !fn(data[i:vend]) {
			return false
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd is the index after the string that starts at data[i], or -1.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the index after the value that starts at data[i], or -1.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := stringEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// String decodes the JSON string raw: without escapes, its bytes when
// they are UTF-8; otherwise as encoding/json does.
func String(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	if s, ok := unescape(inner); ok && raw[len(raw)-1] == '"' {
		return s, true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// unescape decodes the inside of a JSON string whose escapes are the
// common ones (\" \\ \/ \b \f \n \r \t, and \uXXXX of a character that
// is not a surrogate) and whose other bytes are UTF-8 with no control
// character and no bare quote, as encoding/json does; ok false for any
// other, which encoding/json is left to read.
func unescape(inner []byte) (string, bool) {
	if !utf8.Valid(inner) {
		return "", false
	}
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c < 0x20 || c == '"' {
			return "", false
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(inner) {
			return "", false
		}
		i++
		switch inner[i] {
		case '"', '\\', '/':
			out = append(out, inner[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 >= len(inner) {
				return "", false
			}
			r := rune(0)
			for _, h := range inner[i+1 : i+5] {
				switch {
				case h >= '0' && h <= '9':
					r = r<<4 | rune(h-'0')
				case h >= 'a' && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case h >= 'A' && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if r >= 0xd800 && r < 0xe000 {
				return "", false // a surrogate: encoding/json pairs them
			}
			out = utf8.AppendRune(out, r)
			i += 4
		default:
			return "", false
		}
	}
	return string(out), true
}

// maxDepth is the nesting the SDK's decoder accepts (its
// internal/json): a deeper message is the SDK's to refuse.
const maxDepth = 1000

// TooDeep reports whether the objects and arrays of data nest deeper than
// maxDepth.
func TooDeep(data []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// UniqueMembers reports whether data is an object (as Members reads it)
// whose keys are each written once, as written.
func UniqueMembers(data []byte) bool {
	var seen Keys
	return Members(data, func(k, _ []byte) bool { return seen.Add(k) })
}

// Keys is a set of an object's keys as written, for telling a key written
// twice: the few an MCP message has are compared without a map. The zero
// Keys is empty. A key added is not copied: its bytes must not change
// while the set is used.
type Keys struct {
	small [8][]byte
	n     int
	many  map[string]bool
}

// Add adds k and reports whether it was not in the set.
func (s *Keys) Add(k []byte) bool {
	if s.many != nil {
		if s.many[string(k)] {
			return false
		}
		s.many[string(k)] = true
		return true
	}
	for _, seen := range s.small[:s.n] {
		if bytes.Equal(seen, k) {
			return false
		}
	}
	if s.n < len(s.small) {
		s.small[s.n] = k
		s.n++
		return true
	}
	s.many = make(map[string]bool, 2*len(s.small))
	for _, seen := range s.small {
		s.many[string(seen)] = true
	}
	s.many[string(k)] = true
	return true
}

// AppendString appends s to out as json.Marshal writes it (with its HTML
// escaping): an ASCII string here, escapes and all, any other through
// json.Marshal.
func AppendString(out []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			raw, err := json.Marshal(s)
			return append(out, raw...), err
		}
	}
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default: // another control character, or <, > and & (HTML)
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"'), nil
}
