package httpgate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/axgate/axgate"
	igate "github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// ToolServer serves the tools of a manifest over HTTP.
//
// Its routes:
//
//	GET  /tools                 {"tools":[{name, description, inputSchema, axag}, …]}
//	GET  /tools/{name}          one tool, or 404 {"error":"Tool not found: {name}"}
//	POST /tools/{name}/validate the Tool Validation API: {"valid":true} or
//	                            {"valid":false,"errors":[{path,message,keyword}]}
//	POST /tools/{name}/call     the whole chain, then the tool:
//	                            200 {"result": …} or the AXAG error envelope
//
// Discovery and validation are not authenticated and never call a tool;
// a host that wants them behind authentication wraps the whole server in
// its own middleware. Mount it under a prefix with http.StripPrefix.
type ToolServer struct {
	cfg   config
	enf   *axgate.Enforcer
	mux   *http.ServeMux
	tools map[string]*servedTool
	list  []byte
}

type servedTool struct {
	action *manifest.Action
	def    []byte
	chain  middleware.Invoker
}

// NewToolServer returns a server for the tools that have a handler.
//
// Handlers are keyed by tool name (or intent); a key the manifest does not
// declare is an error, and so is a handler already wrapped in the chain
// (axgate.ErrWrapped): the server wraps each one itself. A manifest tool
// without a handler is not served: it is neither listed nor callable, so
// one manifest can be split across services.
func NewToolServer(enf *axgate.Enforcer, handlers map[string]middleware.Invoker, opts ...Option) (*ToolServer, error) {
	if enf == nil {
		return nil, errors.New("httpgate: nil enforcer")
	}
	cfg := newConfig(opts)
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	m := enf.Manifest()
	s := &ToolServer{cfg: cfg, enf: enf, mux: http.NewServeMux(), tools: make(map[string]*servedTool, len(handlers))}
	var errs []error
	keys := make([]string, 0, len(handlers))
	for k := range handlers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := lookup(m, k)
		switch {
		case a == nil:
			errs = append(errs, fmt.Errorf("httpgate: handler %q: the manifest declares no such tool", k))
			continue
		case handlers[k] == nil:
			errs = append(errs, fmt.Errorf("httpgate: handler %q is nil", k))
			continue
		case axgate.Wrapped(handlers[k]):
			errs = append(errs, fmt.Errorf("httpgate: handler %q: %w", k, axgate.ErrWrapped))
			continue
		case s.tools[a.ToolName()] != nil:
			errs = append(errs, fmt.Errorf("httpgate: two handlers for tool %q", a.ToolName()))
			continue
		}
		s.tools[a.ToolName()] = &servedTool{action: a, chain: enf.Wrap(handlers[k])}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var listed []manifest.Tool
	for _, t := range enf.Tools() {
		st := s.tools[t.Name]
		if st == nil {
			continue
		}
		def, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("httpgate: tool %q: %w", t.Name, err)
		}
		st.def = append(def, '\n')
		listed = append(listed, t)
	}
	list, err := json.Marshal(struct {
		Tools []manifest.Tool `json:"tools"`
	}{append([]manifest.Tool{}, listed...)})
	if err != nil {
		return nil, fmt.Errorf("httpgate: tool list: %w", err)
	}
	s.list = append(list, '\n')

	s.mux.HandleFunc("GET /tools", s.listTools)
	s.mux.HandleFunc("GET /tools/{name}", s.getTool)
	s.mux.HandleFunc("POST /tools/{name}/validate", s.validate)
	s.mux.HandleFunc("POST /tools/{name}/call", s.call)
	return s, nil
}

// ServeHTTP serves the tool API.
func (s *ToolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The call route is the hot one. A POST to exactly /tools/{name}/call
	// naming a served tool is routed here directly: the mux would route it
	// the same way (a tool name has no slash and is not "." or ".."), only
	// at the cost of a second pattern match. Everything else, including
	// unknown names, goes through the mux.
	if r.Method == http.MethodPost {
		if name, ok := callPath(r.URL.Path); ok {
			if t := s.tools[name]; t != nil {
				s.serveCall(w, r, name, t)
				return
			}
		}
	}
	s.mux.ServeHTTP(w, r)
}

// callPath returns the {name} of a path /tools/{name}/call.
func callPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/tools/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/call")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

func (s *ToolServer) listTools(w http.ResponseWriter, _ *http.Request) {
	writeRaw(w, http.StatusOK, s.list)
}

func (s *ToolServer) getTool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	t := s.tools[name]
	if t == nil {
		writeMessage(w, http.StatusNotFound, "Tool not found: "+name)
		return
	}
	writeRaw(w, http.StatusOK, t.def)
}

// validate is the Tool Validation API (seeds/002). It is deliberately
// separate from call: nothing here can reach a handler or the principal
// function, and the enforcer's Validate only runs the schema.
func (s *ToolServer) validate(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.tools[name] == nil {
		writeMessage(w, http.StatusNotFound, "Tool not found: "+name)
		return
	}
	body, err := s.cfg.readJSONBody(w, r)
	if err != nil {
		WriteError(w, err)
		return
	}
	res := s.enf.Validate(name, body)
	writeJSON(w, res.Status(), res)
}

func (s *ToolServer) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.serveCall(w, r, name, s.tools[name])
}

// serveCall runs the chain and the tool of t (nil: not a served tool).
func (s *ToolServer) serveCall(w http.ResponseWriter, r *http.Request, name string, t *servedTool) {
	if s.cfg.callsOff {
		writeMessage(w, http.StatusForbidden, "Tool execution is disabled on this server")
		return
	}
	if t == nil {
		// Before the prelude: an unknown tool is refused without
		// authenticating the caller or reading the body.
		s.cfg.writeError(r.Context(), w, igate.IntentNotFound(s.enf.Manifest(), name))
		return
	}
	pre, call, _, err := s.cfg.beginCall(w, r, t.action, false, nil)
	if err != nil {
		s.cfg.writeError(pre.ctx, w, err)
		return
	}
	ctx := pre.ctx
	res, err := t.chain.Invoke(ctx, call)
	if err != nil {
		s.cfg.writeError(ctx, w, err)
		return
	}
	if call.Facts.Replayed {
		w.Header()[HeaderReplayed] = []string{"true"}
	}
	writeResult(w, res.Value)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) { writeBuffered(w, status, body) }
