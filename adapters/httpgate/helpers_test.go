package httpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// enforcer builds an enforcer for testdata/tools.json.
func enforcer(t testing.TB, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.LoadFile(filepath.Join("testdata", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	return enf
}

// refuseWith appends a stage to the pre-execution chain that refuses every
// call with err: the HTTP mapping of a refusal does not depend on which gate
// made it.
func refuseWith(err *axerr.Error) axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "test_refusal", Interceptor: func(context.Context, *middleware.Call, middleware.Invoker) (middleware.Result, error) {
			e := *err
			return middleware.Result{}, &e
		}})
	})
}

// quiet keeps the logs of expected failures out of the test output.
var quiet = httpgate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// seen is what a capturing stage saw of the last call that reached it.
type seen struct {
	mu   sync.Mutex
	call middleware.Call
	ctx  context.Context
}

func (s *seen) get() (middleware.Call, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.call, s.ctx
}

// capture appends a stage to the pre-execution chain that records the call
// (after every standard gate allowed it) and passes it on.
func capture(s *seen) axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "test_capture", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			s.mu.Lock()
			s.call = middleware.Call{Tool: call.Tool, Arguments: call.Arguments, Principal: call.Principal, Credentials: call.Credentials}
			s.ctx = ctx
			s.mu.Unlock()
			return next.Invoke(ctx, call)
		}})
	})
}

// userHeader authenticates by the X-Test-User header (roles from
// X-Test-Roles, default member); no header, no caller.
func userHeader(r *http.Request) (middleware.Principal, error) {
	id := r.Header.Get("X-Test-User")
	if id == "" {
		return middleware.Principal{}, errors.New("no X-Test-User header")
	}
	roles := []string{"member"}
	if r := r.Header.Get("X-Test-Roles"); r != "" {
		roles = strings.Split(r, ",")
	}
	return middleware.Principal{ID: id, Tenant: "acme", Roles: roles}, nil
}

// rejectAll is an authentication hook that rejects every request.
func rejectAll(*http.Request) (middleware.Principal, error) {
	return middleware.Principal{}, errors.New("rejected")
}

// spy is a tool that records its calls.
type spy struct {
	calls atomic.Int32
	last  atomic.Pointer[middleware.Call]
	value any
	err   error
}

func (s *spy) Invoke(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	s.calls.Add(1)
	s.last.Store(call)
	if s.err != nil {
		return middleware.Result{}, s.err
	}
	if s.value != nil {
		return middleware.Result{Value: s.value}, nil
	}
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"echo": args}}, nil
}

// response is a recorded response with its body decoded.
type response struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

func do(t *testing.T, h http.Handler, method, target, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	if _, set := req.Header["Content-Type"]; body != "" && !set {
		// What every JSON client sends; a test of other media types
		// passes its own.
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, target, err, rec.Body.String())
		}
	}
	return res
}

// code returns the AXAG code of an error envelope, or "".
func (r response) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// details returns the details of an error envelope.
func (r response) details() map[string]any {
	e, _ := r.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

// wantRefusal checks the status, code and content type of an envelope.
func (r response) wantRefusal(t *testing.T, code axerr.Code) {
	t.Helper()
	if r.status != code.HTTPStatus() || r.code() != string(code) {
		t.Fatalf("got %d %s, want %d %s\n%s", r.status, r.code(), code.HTTPStatus(), code, r.raw)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	// The tests authenticate by a header (userHeader), not a bearer
	// token: a 401 carries no Bearer challenge (a server with no
	// authentication at all keeps the plain one).
	if r.code() == string(axerr.CodeUnauthenticated) {
		details, _ := r.body["error"].(map[string]any)["details"].(map[string]any)
		if ch := r.header.Get("WWW-Authenticate"); ch != "" && details["reason"] != string(reasons.NoAuthenticator) {
			t.Fatalf("a 401 of header authentication with a challenge: %q", ch)
		}
	}
}

// newMiddleware is httpgate.NewMiddleware for a test: a configuration
// mistake fails the test rather than panicking.
func newMiddleware(t testing.TB, enf *axgate.Enforcer, opts ...httpgate.Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := httpgate.NewMiddleware(enf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}
