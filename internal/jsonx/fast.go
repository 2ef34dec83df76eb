package jsonx

import (
	"strconv"
	"unicode/utf8"
)

// decodeFast decodes the common case of Decode in one pass: no \u escape, no
// repeated key, nothing over a limit, valid syntax and UTF-8, I-JSON numbers
// when asked. It returns false for anything else, which Decode then handles
// (and reports) as before: it accepts nothing Decode would refuse and gives
// the same value encoding/json gives, and never builds an error itself.
func decodeFast(data []byte, lim Limits) (any, bool) {
	d := fastDecoder{data: data, lim: lim}
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	if d.i != len(d.data) {
		return nil, false
	}
	if d.foldable && foldCollides(v) {
		return nil, false
	}
	return v, true
}

type fastDecoder struct {
	data     []byte
	i        int
	lim      Limits
	foldable bool // a key has a capital or a non-ASCII byte (IJSON only)
}

func (d *fastDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *fastDecoder) literal(word string) bool {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

func (d *fastDecoder) object(depth int) (any, bool) {
	if d.lim.MaxDepth > 0 && depth > d.lim.MaxDepth {
		return nil, false
	}
	d.i++ // {
	m := make(map[string]any)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		if d.lim.IJSON && !d.foldable {
			d.foldable = mayFold([]byte(k))
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		m[k] = v
		if d.lim.MaxMembers > 0 && len(m) > d.lim.MaxMembers {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *fastDecoder) array(depth int) (any, bool) {
	if d.lim.MaxDepth > 0 && depth > d.lim.MaxDepth {
		return nil, false
	}
	d.i++ // [
	a := make([]any, 0)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if d.lim.MaxItems > 0 && len(a) > d.lim.MaxItems {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// str reads a string with no \u escape (the scan-based path handles those:
// surrogates and their I-JSON rules).
func (d *fastDecoder) str() (string, bool) {
	d.i++ // "
	start := d.i
	ascii, escaped := true, false
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			raw := d.data[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			if !escaped {
				return string(raw), true
			}
			return unescapeSimple(raw), true
		case c == '\\':
			if d.i+1 >= len(d.data) {
				return "", false
			}
			switch d.data[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default: // \u, or not an escape at all
				return "", false
			}
			escaped = true
			d.i += 2
		case c < 0x20:
			return "", false
		default:
			if c >= 0x80 {
				ascii = false
			}
			d.i++
		}
	}
	return "", false
}

// unescapeSimple resolves the one-letter escapes of raw (no \u).
func unescapeSimple(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		default: // " \ /
			c = raw[i]
		}
		out = append(out, c)
	}
	return string(out)
}

// number reads a JSON number as encoding/json does for an any: a float64.
func (d *fastDecoder) number() (any, bool) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	intStart := d.i
	n := digits()
	if n == 0 || (n > 1 && d.data[intStart] == '0') {
		return nil, false
	}
	simple := n <= 15
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
		simple = false
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
		simple = false
	}
	lit := d.data[start:d.i]
	if simple {
		// At most 15 digits: exact in a float64, and what ParseFloat gives
		// (but for -0, whose sign ParseFloat keeps).
		var x int64
		for _, c := range lit[intStart-start:] {
			x = x*10 + int64(c-'0')
		}
		if lit[0] != '-' {
			return float64(x), true
		}
		if x != 0 {
			return float64(-x), true
		}
	}
	if d.lim.IJSON && !Interoperable(lit) {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}
