package httpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// readBody reads the whole request body, at most c.maxBodyBytes. The bytes
// become the call's arguments, which gates may keep (an approval request
// stores them), so they are never a pooled buffer.
//
// Memory follows the bytes that actually arrive, not the Content-Length a
// client declares: at most maxBodyPrealloc is reserved up front, and the
// buffer grows as the body comes in. Otherwise a few unauthenticated clients
// (the validation endpoint reads bodies before anyone is authenticated)
// could each declare 1 MiB, send it slowly, and hold that memory for
// nothing.
func (c *config) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	declared := r.ContentLength // -1 when unknown (chunked)
	if declared > c.maxBodyBytes {
		return nil, tooLarge(c.maxBodyBytes)
	}
	size := int64(512)
	if declared > 0 {
		size = min(declared, maxBodyPrealloc)
	}
	body := make([]byte, 0, size)
	lr := http.MaxBytesReader(w, r.Body, c.maxBodyBytes)
	for declared <= 0 || int64(len(body)) < declared {
		// net/http's server never returns more than a declared length, so
		// the loop stops there without a read that would need more room.
		if len(body) == cap(body) {
			body = append(body, 0)[:len(body)]
		}
		n, err := lr.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			if declared > 0 && int64(len(body)) < declared {
				return nil, unreadable(io.ErrUnexpectedEOF)
			}
			break
		}
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, tooLarge(c.maxBodyBytes)
			}
			return nil, unreadable(err)
		}
	}
	return body, nil
}

// maxBodyPrealloc is the most readBody reserves before the bytes arrive.
const maxBodyPrealloc = 64 << 10

// readJSONBody is readBody for a body that holds arguments: a non-empty body
// must be declared JSON (see jsonMediaType), or it is refused with 415. A
// body that parses as JSON is not enough: `{"to":"x"}` is also a form with
// one odd field, and a handler that reads r.FormValue would act on a value
// no gate looked at. A body declared with another type is refused before
// it is read, one of unknown length once it turns out not to be empty.
func (c *config) readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	cts := r.Header["Content-Type"]
	ok := len(cts) == 1 && jsonMediaType(cts[0])
	if !ok && r.ContentLength > 0 {
		return nil, unsupportedMediaType(cts)
	}
	body, err := c.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if !ok && len(body) > 0 {
		return nil, unsupportedMediaType(cts)
	}
	return body, nil
}

// jsonMediaType reports whether a Content-Type declares a JSON body:
// application/json or any type with a +json suffix (RFC 6839), with no
// charset or charset utf-8 (RFC 8259 section 8.1: JSON exchanged between
// systems is UTF-8; any other charset would make the bytes the gates read
// and the text the handler decodes differ). Other parameters are allowed.
// Type, subtype and charset compare case-insensitively.
func jsonMediaType(ct string) bool {
	if ct == "application/json" {
		return true // the common case, without parsing
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	typ, sub, _ := strings.Cut(mt, "/")
	if mt != "application/json" && (typ == "" || len(sub) <= len("+json") || !strings.HasSuffix(sub, "+json")) {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	return true
}

// unsupportedMediaType refuses a body of another type than JSON. cts are
// the request's Content-Type values (none, or more than one, are refused
// too).
func unsupportedMediaType(cts []string) *axerr.Error {
	var e *axerr.Error
	switch len(cts) {
	case 0:
		e = axerr.New(axerr.CodeUnsupportedMediaType, "the request has a body but no Content-Type; arguments must be sent as JSON")
	case 1:
		ct := cts[0]
		if len(ct) > maxEchoedContentType {
			ct = ct[:maxEchoedContentType] + "…"
		}
		e = axerr.Newf(axerr.CodeUnsupportedMediaType, "the request body is declared %q; arguments must be sent as JSON (application/json or a +json type, in UTF-8)", ct).
			With("content_type", ct)
	default:
		e = axerr.Newf(axerr.CodeUnsupportedMediaType, "the request has %d Content-Type headers; it must have one, declaring JSON", len(cts))
	}
	return e.WithReason(reasons.UnsupportedMediaType).
		WithSuggestion("Send the body with Content-Type: application/json (or a +json type), charset utf-8 or none.")
}

// maxEchoedContentType bounds how much of a refused Content-Type the error
// repeats.
const maxEchoedContentType = 100

func unreadable(err error) *axerr.Error {
	return axerr.New(axerr.CodeInvalidArguments, "the request body could not be read").WithCause(err)
}

func tooLarge(limit int64) *axerr.Error {
	return axerr.Newf(axerr.CodePayloadTooLarge, "the request body is over the limit of %d bytes", limit).With("max_bytes", limit)
}

// argument is one argument taken from the path or the query string.
type argument struct {
	name  string
	from  string // "path" or "query"
	raw   []byte // its JSON
	value any    // raw decoded, for comparison with the body's
}

// arguments builds a call's argument object from the JSON body and the
// arguments taken from the path and the query (pathAndQuery). The same name
// given twice with different values (path and body) is refused rather than
// guessed between. Without path or query arguments the body is the
// arguments byte for byte ({} for an empty one), and merged is false.
func arguments(a *manifest.Action, body []byte, extra []argument, lim middleware.Limits) (args json.RawMessage, merged bool, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(extra) == 0 {
		if len(trimmed) == 0 {
			return json.RawMessage("{}"), false, nil
		}
		return body, false, nil
	}
	var fromBody map[string]any
	if len(trimmed) > 0 {
		v, err := lim.Resolved().Decode(trimmed)
		if err != nil {
			return nil, false, middleware.DecodeError(err).WithIntent(a.Intent)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, axerr.New(axerr.CodeInvalidArguments, "the request body must be a JSON object").WithIntent(a.Intent)
		}
		fromBody = m
	}
	var out bytes.Buffer
	out.Grow(len(trimmed) + 32*len(extra))
	out.WriteByte('{')
	n := 0
	for _, x := range extra {
		if bv, ok := fromBody[x.name]; ok {
			if !reflect.DeepEqual(bv, x.value) {
				return nil, false, conflict(a, x.name, x.from, "body")
			}
			continue // the body already has it
		}
		if n > 0 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(x.name)
		out.Write(key)
		out.WriteByte(':')
		out.Write(x.raw)
		n++
	}
	if len(fromBody) > 0 {
		inner := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
		if n > 0 {
			out.WriteByte(',')
		}
		out.Write(inner)
	}
	out.WriteByte('}')
	return out.Bytes(), true, nil
}

// pathAndQuery collects the action's parameters, and the identity names
// ident it does not declare (as strings), that appear as path values or
// query parameters; anything else there is the handler's business. An
// identity name (the enforcer's user and tenant argument names) is taken
// even when the action does not declare it because the access gate checks
// it wherever it appears: a handler reading the tenant from
// /tenants/{tenant_id}/… or ?tenant_id= must not act on one no gate saw.
// Path and query strings are converted to the parameter's declared type
// where that is unambiguous (see coerce); one name in the path and the
// query with different values is refused. A query key that differs from one of those names only
// in case is refused: some routers bind query parameters
// case-insensitively, and would hand ?TENANT_ID=globex to the handler as
// the tenant_id no gate looked at.
func pathAndQuery(a *manifest.Action, ident []*manifest.Parameter, r *http.Request) ([]argument, error) {
	var query map[string][]string
	if r.URL.RawQuery != "" {
		query = r.URL.Query()
	}
	if len(a.Parameters) == 0 && len(ident) == 0 {
		return nil, nil
	}
	var out []argument
	take := func(p *manifest.Parameter) error {
		var fromPath *argument
		if v := r.PathValue(p.Name); v != "" {
			x, err := coerce(a, p, "path", []string{v})
			if err != nil {
				return err
			}
			out = append(out, x)
			fromPath = &out[len(out)-1]
		}
		vs, ok := query[p.Name]
		if !ok {
			return nil
		}
		x, err := coerce(a, p, "query", vs)
		if err != nil {
			return err
		}
		if fromPath != nil {
			if !bytes.Equal(fromPath.raw, x.raw) {
				return conflict(a, p.Name, "path", "query")
			}
			return nil
		}
		out = append(out, x)
		return nil
	}
	for _, p := range a.Parameters {
		if err := take(p); err != nil {
			return nil, err
		}
	}
	for _, p := range ident {
		if a.Param(p.Name) != nil {
			continue // taken above, by its declared type
		}
		if err := take(p); err != nil {
			return nil, err
		}
	}
	for k := range query {
		if name, ok := foldsOnto(k, a, ident); ok {
			return nil, ambiguousQueryKey(a, k, name)
		}
	}
	return out, nil
}

// foldsOnto returns the declared parameter or identity name that key equals
// under Unicode case folding without being equal to it.
func foldsOnto(key string, a *manifest.Action, ident []*manifest.Parameter) (string, bool) {
	if a.Param(key) != nil {
		return "", false
	}
	for _, p := range ident {
		if p.Name == key {
			return "", false
		}
	}
	for _, p := range a.Parameters {
		if strings.EqualFold(p.Name, key) {
			return p.Name, true
		}
	}
	for _, p := range ident {
		if strings.EqualFold(p.Name, key) {
			return p.Name, true
		}
	}
	return "", false
}

func ambiguousQueryKey(a *manifest.Action, key, name string) *axerr.Error {
	e := axerr.Newf(axerr.CodeInvalidArguments, "the query parameter %q differs from %q only in case", key, name).
		WithIntent(a.Intent).WithReason(reasons.AmbiguousKeys).With("parameter", name).
		WithSuggestion(fmt.Sprintf("Spell it %s, exactly.", name))
	e.Violations = []axerr.Violation{{Path: "/" + escapePointer(key), Message: "differs from " + name + " only in case", Keyword: "ambiguous_keys", Code: axerr.CodeInvalidArguments}}
	return e
}

// identityParams are the enforcer's user and tenant argument names as
// string parameters, without repeats, for pathAndQuery.
func identityParams(user, tenant []string) []*manifest.Parameter {
	var out []*manifest.Parameter
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, user...), tenant...) {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, &manifest.Parameter{Name: n, Type: "string"})
	}
	return out
}

// coerce turns path or query strings into the JSON value of a declared
// parameter:
//
//   - integer and number: the text itself when it is a number in canonical
//     form ("42", "-1.5"; see isNumber), otherwise a JSON string, which the
//     parameter gate then refuses with AXAG_INVALID_TYPE ("1e3", "1000.0",
//     "042"); an integer that a double does not hold exactly
//     (9007199254740993) is refused here, as in a body (reason
//     number_not_interoperable);
//   - boolean: exactly "true" or "false", otherwise a string (refused);
//   - array: every repetition of the query parameter, in order, each
//     converted by the item type;
//   - string, object and anything else: a JSON string (an object cannot be
//     spelled in a query, so the parameter gate refuses it).
//
// A parameter that is not an array may appear once.
func coerce(a *manifest.Action, p *manifest.Parameter, from string, vals []string) (argument, error) {
	for _, v := range vals {
		if !utf8.ValidString(v) {
			return argument{}, axerr.Newf(axerr.CodeInvalidArguments, "the %s value of %q is not valid UTF-8", from, p.Name).
				WithIntent(a.Intent).With("parameter", p.Name)
		}
	}
	// A number must be one a double holds exactly, as in a body (I-JSON).
	// index is the item's in an array, -1 for a scalar.
	exact := func(typ, v string, index int) error {
		// Any literal, canonical or not ("1e20"), so that the refusal
		// names the reason rather than the type.
		if (typ == "integer" || typ == "number") && isLiteral(v) && !jsonx.Interoperable([]byte(v)) {
			path := "/" + jsonx.EscapePointer(p.Name)
			if index >= 0 {
				path += "/" + strconv.Itoa(index)
			}
			return middleware.DecodeError(&jsonx.Error{Kind: jsonx.NumberNotInteroperable, Path: path,
				Msg: fmt.Sprintf("the %s value of %q is not exactly representable as an IEEE 754 double", from, p.Name)}).
				WithIntent(a.Intent).With("parameter", p.Name)
		}
		return nil
	}
	var raw []byte
	if p.Type == "array" {
		item := "string"
		if p.Items != nil {
			item = p.Items.Type
		}
		raw = append(raw, '[')
		for i, v := range vals {
			if err := exact(item, v, i); err != nil {
				return argument{}, err
			}
			if i > 0 {
				raw = append(raw, ',')
			}
			raw = append(raw, scalar(item, v)...)
		}
		raw = append(raw, ']')
	} else {
		if len(vals) != 1 {
			return argument{}, axerr.Newf(axerr.CodeInvalidArguments, "the %s parameter %q is given %d times but is not an array", from, p.Name, len(vals)).
				WithIntent(a.Intent).With("parameter", p.Name).
				WithSuggestion(fmt.Sprintf("Send %s once.", p.Name))
		}
		if err := exact(p.Type, vals[0], -1); err != nil {
			return argument{}, err
		}
		raw = scalar(p.Type, vals[0])
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		// scalar only produces valid JSON; this is a defect.
		return argument{}, fmt.Errorf("httpgate: %s value of %q: %w", from, p.Name, err)
	}
	return argument{name: p.Name, from: from, raw: raw, value: v}, nil
}

func scalar(typ, s string) []byte {
	switch typ {
	case "integer", "number":
		if isNumber(s) {
			return []byte(s)
		}
	case "boolean":
		if s == "true" || s == "false" {
			return []byte(s)
		}
	}
	b, _ := json.Marshal(s)
	return b
}

// isNumber reports whether s is a number in its one canonical spelling: an
// integer as digits without leading zeros, with '-' only before a non-zero
// value ("42", "-7", "0"; not "042", "-0", "+1"), or a decimal without
// exponent in its shortest form, the one strconv.FormatFloat gives ("-1.5",
// "0.25"; not "1.50", "1000.0", ".5", "1e3"). Any other spelling of a number
// stays a string, which a numeric parameter refuses: the gates compare a
// decoded value, while a handler reads the path or query text itself, and
// fmt.Sscanf("%d") reads "1e3" as 1, not the 1000 the access gate checked.
// (A body is different: the handler gets its canonical re-encoding.)
func isNumber(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return false
	}
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i < 0 {
		// An integer: no leading zero, and no "-0".
		return (digits == "0" && s == "0") || digits[0] != '0'
	} else if digits[i] != '.' {
		return false // an exponent or anything else
	}
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && strconv.FormatFloat(v, 'f', -1, 64) == s
}

// isLiteral reports whether s is a JSON number literal (RFC 8259 section 6),
// in any spelling.
func isLiteral(s string) bool {
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return false
	}
	return json.Valid([]byte(s)) && !strings.ContainsAny(s, " \t\r\n")
}

func conflict(a *manifest.Action, name, from, other string) *axerr.Error {
	e := axerr.Newf(axerr.CodeInvalidArguments, "%q is given in the %s and in the %s with different values", name, from, other).
		WithIntent(a.Intent).
		WithSuggestion(fmt.Sprintf("Give %s once, or the same value in both places.", name))
	e.Violations = []axerr.Violation{{Path: "/" + escapePointer(name), Message: "given twice with different values", Keyword: "conflict", Code: axerr.CodeInvalidArguments}}
	return e
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
