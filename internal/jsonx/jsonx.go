// Package jsonx decodes untrusted JSON strictly.
//
// It refuses invalid UTF-8, nesting deeper than a limit, input over a size
// limit and objects that repeat a key, which encoding/json would otherwise
// accept silently (the last duplicate wins, invalid bytes become U+FFFD). With
// Limits.IJSON it also refuses what RFC 7493 (I-JSON) excludes and what
// decoders disagree on: a number that an IEEE 754 double does not hold
// exactly, a \u escape of half a surrogate pair, and two keys of one object
// that are equal under Unicode simple case folding (encoding/json and many
// other decoders match such keys to one field, the last one winning).
//
// The common case stays as fast as encoding/json: one linear scan counts the
// object members, the nesting depth, each object's member count and each
// array's item count, checks every \u escape, checks
// every number (a short integer, the usual case, at no cost) and notes
// whether any key has a capital, a non-ASCII byte or an escape; json.Unmarshal
// decodes, and the number of keys it kept is compared with the number of
// members scanned. Only when they differ — a duplicate key — or when a key
// could fold onto another does slower work run, and a token walk names the
// offending path only once a problem is certain.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits bound what Decode accepts.
type Limits struct {
	// MaxBytes is the largest input accepted; 0 means no limit.
	MaxBytes int
	// MaxDepth is the deepest nesting of objects and arrays; 0 means no limit.
	MaxDepth int
	// MaxMembers is the most members one object may have; 0 means no limit.
	// It is checked by the scan, before anything is decoded.
	MaxMembers int
	// MaxItems is the most items one array may have; 0 means no limit. It is
	// checked by the scan, before anything is decoded: a megabyte of short
	// items would otherwise become hundreds of megabytes of decoded values.
	MaxItems int
	// IJSON refuses numbers that are not interoperable (see Interoperable)
	// and keys of one object that are equal under Unicode simple case
	// folding, and a \u escape of a surrogate that is not half of a pair
	// (RFC 7493 section 2.1: decoders replace it, reject it or keep it).
	IJSON bool
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
	// NumberNotInteroperable: a number an IEEE 754 double does not hold
	// exactly (Limits.IJSON).
	NumberNotInteroperable
	// AmbiguousKeys: two keys of one object are equal under Unicode simple
	// case folding (Limits.IJSON).
	AmbiguousKeys
	// TooManyMembers: an object has more members than Limits.MaxMembers.
	TooManyMembers
	// TooManyItems: an array has more items than Limits.MaxItems.
	TooManyItems
	// LoneSurrogate: a string escapes a UTF-16 surrogate that is not half
	// of a high+low pair (Limits.IJSON).
	LoneSurrogate
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
	// An input long enough to hold more members or items than the limits
	// allow is scanned first, so that a refusal allocates nothing (the
	// scan allocates nothing); a shorter one cannot be over them.
	if (lim.MaxMembers > 0 && len(data) > 5*lim.MaxMembers) || (lim.MaxItems > 0 && len(data) > 2*lim.MaxItems) {
		if _, _, _, err := scan(data, lim); err != nil {
			return decodeChecked(data, lim)
		}
	}
	if v, ok := decodeFast(data, lim); ok {
		return v, nil
	}
	return decodeChecked(data, lim)
}

// decodeChecked is Decode's path for everything decodeFast leaves: a scan
// beside encoding/json, and the errors with their paths.
func decodeChecked(data []byte, lim Limits) (any, error) {
	if !utf8.Valid(data) {
		return nil, &Error{Kind: BadUTF8, Msg: "input is not valid UTF-8"}
	}
	members, foldable, at, err := scan(data, lim)
	if err != nil {
		if err.Kind == NumberNotInteroperable || err.Kind == TooManyMembers || err.Kind == TooManyItems || err.Kind == LoneSurrogate {
			// Name the path, unless the document is not JSON at all: then
			// the syntax error is the one to report.
			if !json.Valid(data) {
				return nil, syntaxError(data)
			}
			err.Path = pointerAt(data, at)
			err.Msg = fmt.Sprintf("%s at %q", err.Msg, err.Path)
		}
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, &Error{Kind: Syntax, Msg: syntaxMessage(data, err)}
	}
	if members != countKeys(v) {
		if path, key := findDuplicate(data, nil); key != "" {
			return nil, &Error{Kind: DuplicateKey, Path: path, Msg: fmt.Sprintf("duplicate key %q at %q", key, path)}
		}
		return nil, &Error{Kind: DuplicateKey, Msg: "duplicate key"}
	}
	if foldable && foldCollides(v) {
		path, key := findDuplicate(data, FoldKey)
		return nil, &Error{Kind: AmbiguousKeys, Path: path, Msg: fmt.Sprintf("key %q at %q is equal to an earlier key of the same object under case folding", key, path)}
	}
	return v, nil
}

func syntaxError(data []byte) *Error {
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return &Error{Kind: Syntax, Msg: "invalid JSON"}
	}
	return &Error{Kind: Syntax, Msg: syntaxMessage(data, err)}
}

// scan counts the members of all objects (one ':' outside strings each),
// checks the nesting depth, each object's member count and each array's item
// count, and, with lim.IJSON, checks every number and every \u escape and
// reports whether any key might fold onto another (it has an ASCII capital, a
// non-ASCII byte or an escape; keys of lower-case ASCII only cannot collide).
// It does not validate syntax: json.Unmarshal does, and Decode names the path
// of a problem only in a document that is JSON.
//
// A problem's at is the offset of the value it concerns: the number, the
// string, the object with too many members or the array with too many items
// (for a key, the offset just after its ':', where its member's value starts).
func scan(data []byte, lim Limits) (members int, foldable bool, at int, err *Error) {
	depth := 0
	// open holds, while MaxMembers or MaxItems is set, each open container:
	// its offset (for the path of a refusal), whether it is an array, and
	// its count so far — members of an object, commas of an array (an array
	// with n commas has n+1 items). 64 levels without allocating.
	type container struct {
		start, n int
		array    bool
	}
	var openBuf [64]container
	open := openBuf[:0]
	counting := lim.MaxMembers > 0 || lim.MaxItems > 0
	keyStart, keyEnd := 0, 0 // the last string, a key if ':' follows
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			// Skip the string, honouring backslash escapes.
			start := i
			keyStart = i + 1
			for i++; i < len(data); i++ {
				if data[i] == '\\' {
					if !lim.IJSON || i+1 >= len(data) || data[i+1] != 'u' {
						i++
						continue
					}
					n, ok := unicodeEscape(data[i:])
					if !ok {
						return 0, false, stringValueAt(data, start), &Error{Kind: LoneSurrogate, Msg: "a string escapes a UTF-16 surrogate that is not half of a pair"}
					}
					i += n - 1
				} else if data[i] == '"' {
					break
				}
			}
			keyEnd = min(i, len(data))
		case '{', '[':
			depth++
			if lim.MaxDepth > 0 && depth > lim.MaxDepth {
				return 0, false, i, &Error{Kind: TooDeep, Msg: fmt.Sprintf("nesting is deeper than the limit of %d", lim.MaxDepth)}
			}
			if counting {
				open = append(open, container{start: i, array: c == '['})
			}
		case '}', ']':
			depth--
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case ',':
			if lim.MaxItems > 0 && len(open) > 0 && open[len(open)-1].array {
				top := &open[len(open)-1]
				top.n++
				if top.n >= lim.MaxItems {
					return 0, false, top.start, &Error{Kind: TooManyItems, Msg: fmt.Sprintf("an array has more than %d items", lim.MaxItems)}
				}
			}
		case ':':
			members++
			if lim.MaxMembers > 0 && len(open) > 0 && !open[len(open)-1].array {
				top := &open[len(open)-1]
				top.n++
				if top.n > lim.MaxMembers {
					return 0, false, top.start, &Error{Kind: TooManyMembers, Msg: fmt.Sprintf("an object has more than %d members", lim.MaxMembers)}
				}
			}
			if lim.IJSON && !foldable && keyEnd > keyStart {
				foldable = mayFold(data[keyStart:keyEnd])
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if !lim.IJSON {
				continue
			}
			// Fast path: an integer of at most 15 digits is always exact.
			j := i
			if c == '-' {
				j++
			}
			k := j
			for k < len(data) && data[k] >= '0' && data[k] <= '9' {
				k++
			}
			if k-j <= 15 && (k == len(data) || !numberByte(data[k])) {
				i = k - 1
				continue
			}
			for k < len(data) && numberByte(data[k]) {
				k++
			}
			if !Interoperable(data[i:k]) {
				return 0, false, i, &Error{Kind: NumberNotInteroperable, Msg: fmt.Sprintf("the number %s is not exactly representable as an IEEE 754 double", clip(data[i:k]))}
			}
			i = k - 1
		}
	}
	return members, foldable, 0, nil
}

// unicodeEscape reads the \u escape that esc starts with and returns how
// many bytes it and, for a surrogate pair, its second half take, and false
// for a surrogate that is not half of a pair: a high one (D800-DBFF) not
// followed by a low one (DC00-DFFF) escaped the same way, or a low one on its
// own. A malformed escape takes its two bytes and is left to the parser.
func unicodeEscape(esc []byte) (int, bool) {
	r, ok := hex4(esc)
	switch {
	case !ok:
		return 2, true
	case r < 0xD800 || r > 0xDFFF:
		return 6, true
	case r >= 0xDC00:
		return 0, false
	}
	if len(esc) < 12 || esc[6] != '\\' || esc[7] != 'u' {
		return 0, false
	}
	if lo, ok := hex4(esc[6:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
		return 0, false
	}
	return 12, true
}

// hex4 decodes the four hex digits of the \u escape that esc starts with.
func hex4(esc []byte) (rune, bool) {
	if len(esc) < 6 {
		return 0, false
	}
	var r rune
	for _, b := range esc[2:6] {
		switch {
		case b >= '0' && b <= '9':
			b -= '0'
		case b >= 'a' && b <= 'f':
			b -= 'a' - 10
		case b >= 'A' && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}

// stringValueAt returns the offset that names the string starting (at its
// opening quote) at start in a refusal: start for a value, and for a key the
// offset after its ':', where its member's value starts, so that the path
// names the member rather than the one before it.
func stringValueAt(data []byte, start int) int {
	i := start + 1
	for i < len(data) && data[i] != '"' {
		if data[i] == '\\' {
			i++
		}
		i++
	}
	for i++; i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'); i++ {
	}
	if i < len(data) && data[i] == ':' {
		return i + 1
	}
	return start
}

// numberByte reports whether b can continue a JSON number literal.
func numberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-'
}

// clip shortens a literal for a message: an attacker chooses its length.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:20]) + "…" + string(b[len(b)-10:])
	}
	return string(b)
}

// mayFold reports whether a raw key (between its quotes) could be equal to
// another key under case folding: it has an ASCII capital, a non-ASCII byte
// or an escape (which may spell either).
func mayFold(key []byte) bool {
	for _, b := range key {
		if b >= 0x80 || b == '\\' || b >= 'A' && b <= 'Z' {
			return true
		}
	}
	return false
}

// maxSafeInteger is 2^53-1, the largest magnitude of an integer that RFC 7493
// (section 2.2) lets a message carry: from 2^53 on, two integers share one
// double.
const maxSafeInteger = "9007199254740991"

// Interoperable reports whether the JSON number literal lit is an I-JSON number.
//
// That is (RFC 7493 section 2.2) an integer of magnitude at most 2^53-1, or a
// non-integer whose decimal text is the shortest that parses to its double
// (0.1 is; 0.10000000000000001, which is the same double, is not: two texts
// would name one value). Values out of the double's range are not. The
// decision reads the digits and never builds big numbers, whatever the
// exponent. A literal that is not a JSON number is reported interoperable:
// syntax is the parser's business.
func Interoperable(lit []byte) bool {
	var buf [24]byte
	digits, n, point, ok := normalize(lit, &buf)
	if !ok || n == 0 {
		return true // not a number (the parser refuses it), or zero
	}
	// value = 0.digits × 10^point, n significant digits.
	if point >= n {
		// An integer of point digits.
		switch {
		case point < len(maxSafeInteger):
			return true
		case point > len(maxSafeInteger):
			return false
		}
		var w [len(maxSafeInteger)]byte
		k := copy(w[:], digits)
		for ; k < len(w); k++ {
			w[k] = '0'
		}
		return string(w[:]) <= maxSafeInteger
	}
	// A non-integer. With at most 15 significant digits inside the normal
	// range, the decimal round-trips (DBL_DIG): it is the shortest text of
	// its double. More than 17 never is the shortest.
	if n <= 15 && point > -300 {
		return true
	}
	if n > 17 {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || f == 0 {
		return false // ±Inf, or a non-zero text that underflows
	}
	var fb [32]byte
	s := strconv.AppendFloat(fb[:0], f, 'e', -1, 64)
	if s[0] == '-' {
		s = s[1:]
	}
	// s is d[.ddd]e±x: value = 0.dddd × 10^(x+1).
	e := bytes.IndexByte(s, 'e')
	exp, err := strconv.Atoi(string(s[e+1:]))
	if err != nil || exp+1 != point {
		return false
	}
	sd := s[:e]
	if len(sd) > 2 {
		// Drop the point.
		var d [20]byte
		k := copy(d[:], sd[:1])
		k += copy(d[k:], sd[2:])
		sd = d[:k]
	}
	return string(sd) == string(digits)
}

// normalize reads a JSON number literal into its significant digits (no
// leading or trailing zeros; n of them) and the position of the decimal
// point, so that its value is 0.digits × 10^point. digits is a part of lit or
// of buf, and nil when there are more than len(buf) of them (then only n
// matters). The exponent saturates far outside the range of a double, so no
// literal overflows it. ok is false when lit is not a JSON number.
func normalize(lit []byte, buf *[24]byte) (digits []byte, n, point int, ok bool) {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	intStart := i
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	intPart := lit[intStart:i]
	if len(intPart) == 0 || len(intPart) > 1 && intPart[0] == '0' {
		return nil, 0, 0, false
	}
	var frac []byte
	if i < len(lit) && lit[i] == '.' {
		i++
		fs := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
		frac = lit[fs:i]
		if len(frac) == 0 {
			return nil, 0, 0, false
		}
	}
	const sat = 1 << 30
	exp := 0
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		eneg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			eneg = lit[i] == '-'
			i++
		}
		es := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			if exp < sat {
				exp = exp*10 + int(lit[i]-'0')
			}
			i++
		}
		if i == es {
			return nil, 0, 0, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(lit) {
		return nil, 0, 0, false
	}
	frac = bytes.TrimRight(frac, "0")
	if intPart[0] == '0' {
		// 0.000ddd: the zeros after the point move it left.
		k := 0
		for k < len(frac) && frac[k] == '0' {
			k++
		}
		digits = frac[k:]
		return digits, len(digits), exp - k, true
	}
	point = len(intPart) + exp
	if len(frac) == 0 {
		digits = bytes.TrimRight(intPart, "0")
		return digits, len(digits), point, true
	}
	n = len(intPart) + len(frac)
	if n <= len(buf) {
		digits = append(append(buf[:0], intPart...), frac...)
	}
	return digits, n, point, true
}

// foldCollides reports whether any object in v has two keys equal under
// Unicode simple case folding. Exact duplicates were refused before; v is
// what json.Unmarshal produced.
func foldCollides(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		if len(t) > 1 {
			special := false
			for k := range t {
				if mayFold([]byte(k)) {
					special = true
					break
				}
			}
			if special && foldCollidesIn(t) {
				return true
			}
		}
		for _, e := range t {
			if foldCollides(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if foldCollides(e) {
				return true
			}
		}
	}
	return false
}

// foldCollidesIn reports whether two keys of m are equal under simple case
// folding. A small object, the usual case, is checked pair by pair with
// strings.EqualFold (simple folding too), which allocates nothing; a larger
// one through a set of FoldKeys.
func foldCollidesIn(m map[string]any) bool {
	const small = 16
	if len(m) <= small {
		var buf [small]string
		keys := buf[:0]
		for k := range m {
			for _, o := range keys {
				if strings.EqualFold(k, o) {
					return true
				}
			}
			keys = append(keys, k)
		}
		return false
	}
	seen := make(map[string]struct{}, len(m))
	for k := range m {
		f := FoldKey(k)
		if _, dup := seen[f]; dup {
			return true
		}
		seen[f] = struct{}{}
	}
	return false
}

// FoldKey maps every rune of k to one representative of its Unicode simple
// case folding orbit (unicode.SimpleFold), so two keys are equal under
// simple case folding exactly when their FoldKeys are equal. Lower-case
// ASCII maps to itself, so such keys are returned as they are.
func FoldKey(k string) string {
	simple := true
	for i := 0; i < len(k); i++ {
		if b := k[i]; b >= 0x80 || b >= 'A' && b <= 'Z' {
			simple = false
			break
		}
	}
	if simple {
		return k
	}
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the representative of r's simple folding orbit: its
// lower-case ASCII member when it has one (so K, k and the Kelvin sign U+212A
// all give k; S, s and the long s U+017F give s), otherwise its smallest
// member.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	lo := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
		lo = min(lo, f)
	}
	return lo
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
// first key that repeats an earlier key of its object, and the key itself.
// With norm, keys repeat when their norms are equal.
func findDuplicate(data []byte, norm func(string) string) (string, string) {
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
			k := key
			if norm != nil {
				k = norm(key)
			}
			if _, dup := top.keys[k]; dup {
				top.key = key
				return path(), key
			}
			top.keys[k] = struct{}{}
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

// pointerAt returns the JSON Pointer of the value that starts at offset at of
// valid JSON data. It reads the bytes before at once, keeping the key or index
// of each open container, and allocates only for the pointer.
func pointerAt(data []byte, at int) string {
	type frame struct {
		array      bool
		index      int
		key0, key1 int // the raw key (between its quotes) of an object's current member
	}
	var stackBuf [64]frame
	stack := stackBuf[:0]
	strStart, strEnd := 0, 0
	for i := 0; i < at && i < len(data); i++ {
		switch data[i] {
		case '"':
			strStart = i + 1
			for i++; i < len(data); i++ {
				if data[i] == '\\' {
					i++
				} else if data[i] == '"' {
					break
				}
			}
			strEnd = i
		case '{':
			stack = append(stack, frame{})
		case '[':
			stack = append(stack, frame{array: true})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if len(stack) > 0 && stack[len(stack)-1].array {
				stack[len(stack)-1].index++
			}
		case ':':
			if len(stack) > 0 {
				stack[len(stack)-1].key0, stack[len(stack)-1].key1 = strStart, strEnd
			}
		}
	}
	var b strings.Builder
	for _, f := range stack {
		b.WriteByte('/')
		if f.array {
			b.WriteString(strconv.Itoa(f.index))
			continue
		}
		var key string
		if err := json.Unmarshal(data[f.key0-1:f.key1+1], &key); err != nil {
			key = string(data[f.key0:f.key1])
		}
		b.WriteString(EscapePointer(key))
	}
	return b.String()
}

// syntaxMessage describes a syntax error of data where a person looks for
// it: by line and column (of characters, from 1), as the YAML errors do.
func syntaxMessage(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineColumn(data, se.Offset)
		return fmt.Sprintf("%s (line %d, column %d)", se.Error(), line, col)
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return ue.Error()
	}
	return err.Error()
}

// lineColumn returns the line and column (both from 1; the column counts
// characters) of the byte the decoder stopped at: offset is the number of
// bytes read before the error, so the offending byte is the one before it.
// At the end of the input it is the position after the last character
// that is not white space (where the document was cut short).
func lineColumn(data []byte, offset int64) (line, col int) {
	at := int(offset) - 1
	if offset >= int64(len(data)) || at < 0 {
		at = len(bytes.TrimRight(data, " \t\r\n"))
	}
	before := data[:at]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
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
