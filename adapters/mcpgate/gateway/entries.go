package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// This file serves the manifest's resources and prompts (manifest.Resource,
// manifest.Prompt): what the manifest does not declare is refused and never
// forwarded; what it declares passes the enforcer's chain of its read
// action (access, rate limit, audit, telemetry) before it is.

// entry receives the requests about resources, prompts and completions.
// It returns handled false for the methods it does not serve.
func (f *front) entry(ctx context.Context, ss *mcp.ServerSession, method string, req mcp.Request, next mcp.MethodHandler) (res mcp.Result, handled bool, err error) {
	set := f.g.set()
	switch method {
	case "resources/list", "resources/templates/list", "prompts/list":
		if f.g.cfg.toolsOnly {
			return nil, true, notFound(method)
		}
		res, err = f.list(ctx, ss, method, req)
		return res, true, err
	case "resources/read":
		p, _ := req.GetParams().(*mcp.ReadResourceParams)
		if p == nil {
			return nil, false, nil // the SDK refuses it
		}
		res, err = f.resource(ctx, ss, req, method, p.URI, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			res, err := cs.ReadResource(ctx, clean(p))
			if err != nil {
				return nil, err
			}
			// A read may answer with several contents (a folder's
			// files): the client gets only those of URIs the manifest
			// declares and the caller may read, whatever the upstream
			// put beside the one asked for.
			from, _, _ := set.resource(p.URI)
			readable := f.readable(ctx, ss, req, from)
			kept := res.Contents[:0]
			for _, c := range res.Contents {
				if c != nil && readable(c.URI) {
					kept = append(kept, c)
				}
			}
			res.Contents = kept
			return result(res, nil)
		})
		return res, true, err
	case "resources/subscribe":
		p, _ := req.GetParams().(*mcp.SubscribeParams)
		if p == nil {
			return nil, false, nil
		}
		if _, err := f.resource(ctx, ss, req, method, p.URI, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			return nil, cs.Subscribe(ctx, clean(p))
		}); err != nil {
			return nil, true, err
		}
		// The front acknowledges it (and keeps the subscription) once the
		// upstream took it.
		res, err = next(ctx, method, req)
		return res, true, err
	case "resources/unsubscribe":
		p, _ := req.GetParams().(*mcp.UnsubscribeParams)
		if p == nil {
			return nil, false, nil
		}
		if f.g.cfg.toolsOnly {
			return nil, true, notFound(method)
		}
		// Ending a subscription reads nothing: it needs the resource
		// declared and the caller's access, not a rate-limit charge.
		b, r, vars := set.resource(p.URI)
		if r == nil {
			return nil, true, mcpgate.JSONRPCError(resourceNotFound(p.URI))
		}
		pr, err := f.principalOf(ctx, ss, req.GetExtra())
		if err == nil {
			err = b.pol().access.Check(entryCall(method, r.Action, anyMap(vars), pr))
		}
		if err != nil {
			return nil, true, mcpgate.JSONRPCError(asAXAG(err))
		}
		if _, err := f.toUpstream(ctx, ss, b, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			return nil, cs.Unsubscribe(ctx, clean(p))
		}); err != nil {
			return nil, true, err
		}
		res, err = next(ctx, method, req)
		return res, true, err
	case "prompts/get":
		p, _ := req.GetParams().(*mcp.GetPromptParams)
		if p == nil {
			return nil, false, nil
		}
		if f.g.cfg.toolsOnly {
			return nil, true, notFound(method)
		}
		b, name := set.route(p.Name)
		var pr *manifest.Prompt
		if b != nil {
			pr = b.pol().m.Prompt(name)
		}
		if pr == nil {
			return nil, true, mcpgate.JSONRPCError(promptNotFound(p.Name))
		}
		// The upstream gets its own name of the prompt.
		gp := clean(p)
		gp.Name = name
		res, err = f.gated(ctx, ss, b, req, method, pr.Action, anyMap(p.Arguments), func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			res, err := cs.GetPrompt(ctx, gp)
			if err != nil {
				return nil, err
			}
			// A prompt may embed resources (one whose argument is a URI
			// embeds what it names): the client gets only those the
			// caller may read, as of a read's answer.
			readable := f.readable(ctx, ss, req, b)
			kept := res.Messages[:0]
			for _, msg := range res.Messages {
				if msg == nil {
					continue
				}
				if e, ok := msg.Content.(*mcp.EmbeddedResource); ok && (e.Resource == nil || !readable(e.Resource.URI)) {
					continue
				}
				kept = append(kept, msg)
			}
			res.Messages = kept
			return result(res, nil)
		})
		return res, true, err
	case "completion/complete":
		p, _ := req.GetParams().(*mcp.CompleteParams)
		if p == nil || p.Ref == nil {
			return nil, false, nil
		}
		if f.g.cfg.toolsOnly {
			return nil, true, notFound(method)
		}
		// The arguments a completion is about are those typed so far.
		args := map[string]any{}
		if p.Context != nil {
			for k, v := range p.Context.Arguments {
				args[k] = v
			}
		}
		args[p.Argument.Name] = p.Argument.Value
		// The upstream gets the reference the gate checked, and only it.
		cp := clean(p)
		ref := &mcp.CompleteReference{Type: p.Ref.Type}
		cp.Ref = ref
		var a *manifest.Action
		var b *backend
		switch p.Ref.Type {
		case "ref/prompt":
			var name string
			b, name = set.route(p.Ref.Name)
			ref.Name = name
			var pr *manifest.Prompt
			if b != nil {
				pr = b.pol().m.Prompt(name)
			}
			if pr == nil {
				return nil, true, mcpgate.JSONRPCError(promptNotFound(p.Ref.Name))
			}
			a = pr.Action
		case "ref/resource":
			ref.URI = p.Ref.URI
			if tb, r := set.template(p.Ref.URI); r != nil {
				b, a = tb, r.Action
			}
			if a == nil {
				rb, r, vars := set.resource(p.Ref.URI)
				if r == nil {
					return nil, true, mcpgate.JSONRPCError(resourceNotFound(p.Ref.URI))
				}
				b, a = rb, r.Action
				for k, v := range vars {
					args[k] = v
				}
			}
		default:
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown completion reference type %q", p.Ref.Type)}
		}
		res, err = f.gated(ctx, ss, b, req, method, a, args, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			res, err := cs.Complete(ctx, cp)
			if err != nil {
				return nil, err
			}
			// A value the caller could not use is not its to learn (the
			// upstream completes a tenant argument with every tenant): the
			// client gets those that pass the access gate as the argument.
			pr, perr := f.principalOf(ctx, ss, req.GetExtra())
			vals := res.Completion.Values[:0]
			for _, v := range res.Completion.Values {
				args[p.Argument.Name] = v
				if perr == nil && b.pol().access.Check(entryCall(method, a, args, pr)) == nil {
					vals = append(vals, v)
				}
			}
			if len(vals) != len(res.Completion.Values) {
				// The upstream's count and "more" include the dropped.
				res.Completion.Total, res.Completion.HasMore = 0, false
			}
			res.Completion.Values = vals
			return result(res, nil)
		})
		return res, true, err
	}
	return nil, false, nil
}

// readable returns whether the caller of req may read a resource URI: a
// manifest declares it and the caller passes its access gate. A caller who
// cannot be authenticated may read none. The URIs of an answer of the
// upstream from are those its own manifest declares: another upstream's
// are not its to send.
func (f *front) readable(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, from *backend) func(uri string) bool {
	p, err := f.principalOf(ctx, ss, req.GetExtra())
	set := f.g.set()
	return func(uri string) bool {
		if err != nil {
			return false
		}
		b, r, vars := set.resource(uri)
		return r != nil && b == from && b.pol().mayUse(p, r.Action, vars)
	}
}

// resource runs a request about one resource URI through the chain of the
// entry that declares it.
func (f *front) resource(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, method, uri string, do func(context.Context, *mcp.ClientSession) (mcp.Result, error)) (mcp.Result, error) {
	if f.g.cfg.toolsOnly {
		return nil, notFound(method)
	}
	b, r, vars := f.g.set().resource(uri)
	if r == nil {
		return nil, mcpgate.JSONRPCError(resourceNotFound(uri))
	}
	return f.gated(ctx, ss, b, req, method, r.Action, anyMap(vars), func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
		res, err := do(ctx, cs)
		if err == nil && method == "resources/subscribe" {
			if p, perr := f.principalOf(ctx, ss, req.GetExtra()); perr == nil {
				f.g.linkFor(f, ss, b).subscriber.Store(&p)
			}
		}
		return res, err
	})
}

// entryJob carries a request from gated, through the chain, to
// forwardEntry.
type entryJob struct {
	f   *front
	b   *backend
	ss  *mcp.ServerSession
	do  func(context.Context, *mcp.ClientSession) (mcp.Result, error)
	res mcp.Result
	// rpcErr is the upstream's (or the bounds') JSON-RPC error, passed on
	// to the client as it is.
	rpcErr error
}

type entryJobKey struct{}

// gated runs a request for a declared resource or prompt through the
// enforcer's chain of its action a, with args as the call's arguments (a
// template's variables, a prompt's arguments), and forwards it with do only
// when the chain allows it. A refusal is a JSON-RPC error with the AXAG
// envelope in its data.
func (f *front) gated(ctx context.Context, ss *mcp.ServerSession, b *backend, req mcp.Request, method string, a *manifest.Action, args map[string]any, do func(context.Context, *mcp.ClientSession) (mcp.Result, error)) (mcp.Result, error) {
	p, err := f.principalOf(ctx, ss, req.GetExtra())
	if err != nil {
		return nil, mcpgate.JSONRPCError(asAXAG(err))
	}
	job := &entryJob{f: f, b: b, ss: ss, do: do}
	_, err = b.pol().entries.Invoke(context.WithValue(ctx, entryJobKey{}, job), entryCall(method, a, args, p))
	if job.rpcErr != nil {
		return nil, job.rpcErr
	}
	if err != nil {
		return nil, mcpgate.JSONRPCError(asAXAG(err))
	}
	return job.res, nil // nil for a subscribe, which the front answers
}

// forwardEntry is the tool behind the chain of a resource or prompt: the
// upstream, within the bounds of a call (toUpstream).
func (b *backend) forwardEntry(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	job, _ := ctx.Value(entryJobKey{}).(*entryJob)
	if job == nil || job.b != b {
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "the request reached the gateway's upstream without a session").WithIntent(call.Intent())
	}
	res, err := job.f.toUpstream(ctx, job.ss, b, job.do)
	if err != nil {
		job.rpcErr = err
		return middleware.Result{}, axerr.New(axerr.CodeToolFailed, "the upstream refused the request").WithIntent(call.Intent())
	}
	job.res = res
	return middleware.Result{Value: res}, nil
}

// entryCall is the chain's call for a request about a resource or prompt.
func entryCall(method string, a *manifest.Action, args map[string]any, p middleware.Principal) *middleware.Call {
	raw, err := json.Marshal(args)
	if err != nil || args == nil {
		raw = json.RawMessage("{}")
	}
	call := middleware.NewCall(method, raw, p)
	call.Action = a
	return call
}

// mayUse reports whether p passes the access gate for a resource's or
// prompt's action, with args (a template's variables).
func (p *policy) mayUse(pr middleware.Principal, a *manifest.Action, vars map[string]string) bool {
	return p.access.Check(entryCall("", a, anyMap(vars), pr)) == nil
}

// anyMap is a template's variables (or a prompt's arguments) as the
// arguments of a call.
func anyMap(vars map[string]string) map[string]any {
	args := make(map[string]any, len(vars))
	for k, v := range vars {
		args[k] = v
	}
	return args
}

// asAXAG is err as an AXAG error; one that is not becomes an internal
// error that says nothing of its cause.
func asAXAG(err error) *axerr.Error {
	if ae, ok := axerr.As(err); ok {
		return ae
	}
	return axerr.New(axerr.CodeInternal, "the gateway could not decide the request").WithCause(err)
}

func resourceNotFound(uri string) *axerr.Error {
	return axerr.Newf(axerr.CodeIntentNotFound, "no resource %q is declared", bound(uri)).
		With("uri", bound(uri)).
		WithSuggestion("Read one of the resources resources/list or resources/templates/list lists.")
}

func promptNotFound(name string) *axerr.Error {
	return axerr.Newf(axerr.CodeIntentNotFound, "no prompt named %q", bound(name)).
		With("prompt", bound(name)).
		WithSuggestion("Use one of the prompts prompts/list lists.")
}

// list answers resources/list, resources/templates/list and prompts/list
// with the upstream's entries that the manifest declares and this caller
// may use, with the manifest's descriptions, in one page: the gateway reads
// the upstream's pages itself (at most WithMaxUpstreamTools), so a client's
// cursor never reaches the upstream and no page holds an entry the manifest
// does not declare. A caller who cannot be authenticated is listed nothing.
func (f *front) list(ctx context.Context, ss *mcp.ServerSession, method string, req mcp.Request) (mcp.Result, error) {
	var res mcp.Result
	var cursor string
	switch method {
	case "resources/list":
		r := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
		res = r
		if p, _ := req.GetParams().(*mcp.ListResourcesParams); p != nil {
			cursor = p.Cursor
		}
	case "resources/templates/list":
		r := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
		res = r
		if p, _ := req.GetParams().(*mcp.ListResourceTemplatesParams); p != nil {
			cursor = p.Cursor
		}
	default:
		r := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
		res = r
		if p, _ := req.GetParams().(*mcp.ListPromptsParams); p != nil {
			cursor = p.Cursor
		}
	}
	if cursor != "" {
		return res, nil // one page: there is nothing after it
	}
	pr, err := f.principalOf(ctx, ss, req.GetExtra())
	if err != nil {
		return res, nil
	}
	set := f.g.set()
	for _, b := range set.list {
		pol := b.pol()
		m := pol.m
		declared := len(m.Prompts) > 0
		if method != "prompts/list" {
			declared = len(m.Resources) > 0
		}
		if !declared {
			continue // nothing to list upstream
		}
		_, err = f.toUpstream(ctx, ss, b, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			return nil, b.readPages(ctx, cs, method, func(item any) {
				switch it := item.(type) {
				case *mcp.Resource:
					// A URI another upstream declares is not this one's.
					if rb, e, vars := set.resource(it.URI); rb == b && pol.mayUse(pr, e.Action, vars) {
						c := *it
						c.Description = e.Action.Description
						c.Meta = nil
						r := res.(*mcp.ListResourcesResult)
						r.Resources = append(r.Resources, &c)
					}
				case *mcp.ResourceTemplate:
					for _, e := range m.Resources {
						if e.URITemplate != "" && e.URITemplate == it.URITemplate && pol.mayUse(pr, e.Action, nil) {
							c := *it
							c.Description = e.Action.Description
							c.Meta = nil
							r := res.(*mcp.ListResourceTemplatesResult)
							r.ResourceTemplates = append(r.ResourceTemplates, &c)
							break
						}
					}
				case *mcp.Prompt:
					if e := m.Prompt(it.Name); e != nil && pol.mayUse(pr, e.Action, nil) {
						c := *it
						c.Name = b.prefix + it.Name
						c.Description = e.Action.Description
						c.Meta = nil
						r := res.(*mcp.ListPromptsResult)
						r.Prompts = append(r.Prompts, &c)
					}
				}
			})
		})
		if err != nil {
			if len(set.list) == 1 {
				return nil, err
			}
			// One upstream down: the others' entries are listed.
			b.cfg.logger.Warn("listing the upstream's entries failed; the others' are listed", "method", method, "error", err)
		}
	}
	return res, nil
}

// readPages reads every page of one of the upstream's lists, at most
// WithMaxUpstreamTools pages and entries, and hands each entry to keep.
func (b *backend) readPages(ctx context.Context, cs *mcp.ClientSession, method string, keep func(any)) error {
	cursor, n := "", 0
	for range b.cfg.maxToolPages {
		var next string
		switch method {
		case "resources/list":
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return err
			}
			for _, it := range r.Resources {
				if it != nil {
					keep(it)
				}
			}
			n, next = n+len(r.Resources), r.NextCursor
		case "resources/templates/list":
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return err
			}
			for _, it := range r.ResourceTemplates {
				if it != nil {
					keep(it)
				}
			}
			n, next = n+len(r.ResourceTemplates), r.NextCursor
		default:
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return err
			}
			for _, it := range r.Prompts {
				if it != nil {
					keep(it)
				}
			}
			n, next = n+len(r.Prompts), r.NextCursor
		}
		if next == "" {
			return nil
		}
		if n > b.cfg.maxTools {
			break
		}
		cursor = next
	}
	b.cfg.logger.Warn("the upstream's list is longer than the gateway reads (WithMaxUpstreamTools); listed its first pages", "method", method)
	return nil
}

// passesNotification reports whether an upstream notification about
// resources or prompts may reach the link's client: a list change only of
// a kind the manifest declares; a resource update only for a declared URI
// that the session's subscriber may read.
func (l *link) passesNotification(method string, uri string) bool {
	pol := l.b.pol()
	m := pol.m
	switch method {
	case "notifications/resources/list_changed":
		return len(m.Resources) > 0
	case "notifications/prompts/list_changed":
		return len(m.Prompts) > 0
	case "notifications/resources/updated":
		p := l.subscriber.Load()
		if p == nil {
			return false
		}
		r, vars := m.Resource(uri)
		return r != nil && pol.mayUse(*p, r.Action, vars)
	}
	return true
}

// reportMissingEntries logs, as reportMissing does for tools (always, or
// when what is missing changed), the
// manifest's prompts, resources (an exact uri) and resource templates that
// the upstream does not list. A uri_prefix is not checked: the upstream
// need not list the resources under it. A list that fails is not reported
// on, rather than have every entry of it called missing.
func (l *link) reportMissingEntries(ctx context.Context, cs *mcp.ClientSession, always bool) {
	m := l.b.pol().m
	if len(m.Prompts) == 0 && len(m.Resources) == 0 {
		return
	}
	var caps *mcp.ServerCapabilities
	if ir := cs.InitializeResult(); ir != nil {
		caps = ir.Capabilities
	}
	offered := map[string]bool{}
	read := func(method string) bool {
		err := l.b.readPages(ctx, cs, method, func(item any) {
			switch it := item.(type) {
			case *mcp.Prompt:
				offered["prompt "+it.Name] = true
			case *mcp.Resource:
				offered["resource "+it.URI] = true
			case *mcp.ResourceTemplate:
				offered["template "+it.URITemplate] = true
			}
		})
		if err != nil {
			l.b.cfg.logger.Debug("listing the upstream's entries to compare them with the manifest failed", "method", method, "error", err)
		}
		return err == nil
	}
	if len(m.Prompts) > 0 && (caps == nil || caps.Prompts == nil || read("prompts/list")) {
		var names []string
		for _, p := range m.Prompts {
			names = append(names, p.Name)
		}
		l.b.reportMissing("prompt", names, func(n string) bool { return offered["prompt "+n] }, always)
	}
	if len(m.Resources) == 0 {
		return
	}
	var uris, templates []string
	for _, r := range m.Resources {
		switch {
		case r.URI != "":
			uris = append(uris, r.URI)
		case r.URITemplate != "":
			templates = append(templates, r.URITemplate)
		}
	}
	noResources := caps == nil || caps.Resources == nil
	if len(uris) > 0 && (noResources || read("resources/list")) {
		l.b.reportMissing("resource", uris, func(u string) bool { return offered["resource "+u] }, always)
	}
	if len(templates) > 0 && (noResources || read("resources/templates/list")) {
		l.b.reportMissing("template", templates, func(u string) bool { return offered["template "+u] }, always)
	}
}
