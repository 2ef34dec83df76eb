package httpgate

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	igate "github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// The pages people decide on: server-rendered, no script, one stylesheet
// allowed by its hash.

//go:embed pages/*.html pages/style.css
var pageFiles embed.FS

var (
	pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
	}).ParseFS(pageFiles, "pages/*.html"))
	pageStyle = func() string {
		b, err := pageFiles.ReadFile("pages/style.css")
		if err != nil {
			panic(err) // embedded at build time
		}
		return string(b)
	}()
	// pageCSP allows nothing but the embedded stylesheet (by its hash),
	// forms posting to this origin, and no framing.
	pageCSP = func() string {
		sum := sha256.Sum256([]byte(pageStyle))
		return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	}()
)

// inboxPageSize is how many requests one inbox page lists.
const inboxPageSize = 20

// requestID matches the ids of approval and confirmation requests.
var requestID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// pageData is what a page template renders.
type pageData struct {
	Title    string
	Style    template.CSS
	Base     string
	Person   *middleware.Principal
	CSRF     string
	Next     string
	DevUsers []middleware.Principal
	Status   int
	Message  string

	// The inbox.
	Items      []inboxItem
	NextCursor string
	// One request.
	Req *requestView
}

type inboxItem struct {
	ID, Kind, Intent, Tool, Requester, Risk, Message string
	CreatedAt, ExpiresAt                             time.Time
	Progress                                         string
}

type requestView struct {
	gates.ApprovalRequest
	Confirmation  bool
	Risk, Message string
	Args          []argRow
	State         string
	Approvals     int
	Decisions     []gates.ApprovalDecision
	CanConfirm    bool
	CanApprove    bool
	CanDeny       bool
	Note          string
}

type argRow struct {
	Name, Value, Short string
	Folded             bool
	Length             int
}

// setPageHeaders sets the headers of every answer of the human handler:
// nothing cached, no framing, no script, no sniffing, no referrer.
func setPageHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func (h *humanHandler) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	d.Style = template.CSS(pageStyle)
	d.Base = basePath(r)
	d.Status = status
	// The page's header names the person signed in: looked up unless the
	// handler had it, or the store of the sessions just failed.
	if d.Person == nil && status != http.StatusServiceUnavailable {
		if s, _ := h.current(r); s != nil {
			d.Person, d.CSRF = &s.person, s.csrf
		}
	}
	var b bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&b, name, d); err != nil {
		h.cfg.log.Error("httpgate: rendering a page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (h *humanHandler) errorPage(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	h.render(w, r, status, "error", pageData{Title: title, Message: msg})
}

// signedInOr returns the session, or sends the person to sign in (a GET)
// or refuses (a POST).
func (h *humanHandler) signedInOr(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, err := h.current(r)
	if err != nil {
		h.unavailable(w, r)
		return nil, false
	}
	if s != nil {
		return s, true
	}
	if h.cfg.signIn == nil {
		h.errorPage(w, r, http.StatusNotFound, "Sign-in is not configured", "These pages need a sign-in (WithOIDCSignIn, or the --oidc-issuer flags of axgate).")
		return nil, false
	}
	if r.Method != http.MethodGet {
		h.errorPage(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended: sign in again.")
		return nil, false
	}
	next := safeNext(r.URL.Path)
	http.Redirect(w, r, basePath(r)+"/signin?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
	return nil, false
}

// inbox lists the requests the person may decide and their own pending
// confirmations, a page at a time.
func (h *humanHandler) inbox(w http.ResponseWriter, r *http.Request) {
	s, ok := h.signedInOr(w, r)
	if !ok {
		return
	}
	list, next, err := h.enf.Approvals().Pending(r.Context(), s.person, r.URL.Query().Get("cursor"), inboxPageSize)
	if err != nil {
		h.decisionError(w, r, err)
		return
	}
	d := pageData{Title: "Requests waiting for you", NextCursor: next, Person: &s.person, CSRF: s.csrf}
	m := h.enf.Manifest()
	for _, req := range list {
		it := inboxItem{ID: req.ID, Kind: kindLabel(req), Intent: req.Intent, Tool: req.Tool, Requester: req.Requester,
			CreatedAt: req.CreatedAt, ExpiresAt: req.ExpiresAt}
		if a := m.Action(req.Intent); a != nil {
			it.Risk = string(a.RiskLevel)
			it.Message = igate.RenderConfirmationMessage(a, decodeArgs(req.Arguments))
		}
		if !isConfirmation(req) {
			it.Progress = fmt.Sprintf("%d of %d approvals", distinctApprovals(req), max(req.Count, 1))
		}
		d.Items = append(d.Items, it)
	}
	h.render(w, r, http.StatusOK, "inbox", d)
}

func isConfirmation(r gates.ApprovalRequest) bool { return r.Kind == "confirmation" }

func kindLabel(r gates.ApprovalRequest) string {
	if isConfirmation(r) {
		return "Confirmation"
	}
	return "Approval"
}

func distinctApprovals(r gates.ApprovalRequest) int {
	var seen []string
	for _, d := range r.Decisions {
		if d.Approve && !slices.Contains(seen, d.Approver) {
			seen = append(seen, d.Approver)
		}
	}
	return len(seen)
}

func decodeArgs(raw json.RawMessage) map[string]any {
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&args)
	return args
}

// request shows one request.
func (h *humanHandler) request(w http.ResponseWriter, r *http.Request) {
	s, ok := h.signedInOr(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if !requestID.MatchString(id) {
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such request.")
		return
	}
	req, err := h.enf.Approvals().Request(r.Context(), s.person, id)
	if err != nil {
		h.decisionError(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "request", pageData{Title: kindLabel(req) + ": " + req.Intent, Req: h.view(req, s.person), Person: &s.person, CSRF: s.csrf})
}

// view is what the page of req shows to person.
func (h *humanHandler) view(req gates.ApprovalRequest, person middleware.Principal) *requestView {
	v := &requestView{ApprovalRequest: req, Confirmation: isConfirmation(req), Approvals: distinctApprovals(req), Decisions: req.Decisions}
	args := decodeArgs(req.Arguments)
	if a := h.enf.Manifest().Action(req.Intent); a != nil {
		v.Risk = string(a.RiskLevel)
		v.Message = igate.RenderConfirmationMessage(a, args)
	}
	v.Args = argRows(req.Arguments)
	now := time.Now()
	lapsed := !req.ExpiresAt.IsZero() && !now.Before(req.ExpiresAt)
	pending := req.State == gates.ApprovalPending && !lapsed
	v.State = string(req.State)
	switch {
	case lapsed && req.State == gates.ApprovalPending:
		v.State = "expired"
	case v.Confirmation && req.State == gates.ApprovalApproved:
		v.State = "confirmed"
	}
	mine := person.ID == req.Requester && person.Tenant == req.Tenant
	decided := slices.ContainsFunc(req.Decisions, func(d gates.ApprovalDecision) bool { return d.Approver == person.ID })
	switch {
	case v.Confirmation:
		v.CanConfirm, v.CanDeny = pending && mine, pending && mine
		if pending && !mine {
			v.Note = "Only the person who made this call can confirm it."
		}
	case mine:
		v.Note = "This is your own call: other people approve it."
	case decided:
		v.Note = "You have decided this request."
	default:
		may := person.HasRole(req.Roles...)
		v.CanApprove, v.CanDeny = pending && may, pending && may
	}
	if !pending && v.Note == "" {
		v.Note = "This request is " + v.State + ": there is nothing left to decide."
	}
	return v
}

// Folding of long argument values.
const (
	foldRunes = 160
	foldLines = 6
	shortRune = 80
)

// argRows shows the arguments exactly: each top-level value as JSON (so a
// string's quotes, escapes and spaces show), with invisible characters
// spelled out, and long values folded.
func argRows(raw json.RawMessage) []argRow {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return []argRow{row("(arguments)", raw)}
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	rows := make([]argRow, 0, len(names))
	for _, k := range names {
		rows = append(rows, row(visible(k), obj[k]))
	}
	return rows
}

func row(name string, raw json.RawMessage) argRow {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		out.Reset()
		out.Write(raw)
	}
	v := visible(out.String())
	r := argRow{Name: name, Value: v, Length: utf8.RuneCountInString(v)}
	if r.Length > foldRunes || strings.Count(v, "\n") >= foldLines {
		r.Folded = true
		first, _, _ := strings.Cut(v, "\n")
		if utf8.RuneCountInString(first) > shortRune {
			first = string([]rune(first)[:shortRune])
		}
		r.Short = first + " …"
	}
	return r
}

// visible spells out the characters a person would not see: controls
// (other than newline), format characters (bidirectional overrides,
// zero-width), and other invisible ones, as \u{…}.
func visible(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c == '\n' || (unicode.IsGraphic(c) && !unicode.Is(unicode.Cf, c)) || c == ' ' {
			b.WriteRune(c)
			continue
		}
		fmt.Fprintf(&b, `\u{%X}`, c)
	}
	return b.String()
}

// decide records the person's decision from the request's page.
func (h *humanHandler) decideForm(w http.ResponseWriter, r *http.Request) {
	s, ok := h.signedInOr(w, r)
	if !ok {
		return
	}
	if !h.formAllowed(w, r, s) {
		return
	}
	id := r.PathValue("id")
	if !requestID.MatchString(id) {
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such request.")
		return
	}
	decision := r.PostForm.Get("decision")
	if decision != "confirm" && decision != "approve" && decision != "deny" {
		h.errorPage(w, r, http.StatusBadRequest, "Bad request", "The decision must be confirm, approve or deny.")
		return
	}
	req, err := h.enf.Approvals().Request(r.Context(), s.person, id)
	if err != nil {
		h.decisionError(w, r, err)
		return
	}
	switch {
	case decision == "confirm" && !isConfirmation(req):
		h.errorPage(w, r, http.StatusBadRequest, "Bad request", "This request is an approval: approve or deny it.")
		return
	case decision == "approve" && isConfirmation(req):
		h.errorPage(w, r, http.StatusBadRequest, "Bad request", "This request is a confirmation: confirm or deny it.")
		return
	}
	reason := r.PostForm.Get("reason")
	if utf8.RuneCountInString(reason) > 500 {
		reason = string([]rune(reason)[:500])
	}
	if _, _, _, err := h.enf.Approvals().Decide(r.Context(), s.person, id, decision != "deny", reason); err != nil {
		h.decisionError(w, r, err)
		return
	}
	h.cfg.log.Info("httpgate: decided", "request", id, "person", s.person.ID, "tenant", s.person.Tenant, "decision", decision)
	http.Redirect(w, r, basePath(r)+"/requests/"+id, http.StatusSeeOther)
}

// decisionError shows a refusal of the approval workflow: an unknown
// request (or another tenant's) is 404, a person who may not see or decide
// it 403, a second decision 409.
func (h *humanHandler) decisionError(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := axerr.As(err)
	if !ok {
		h.cfg.log.Error("httpgate: approval workflow", "err", err)
		h.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "The request could not be handled. Try again later.")
		return
	}
	reason, _ := e.Details["reason"].(string)
	switch axerr.Reason(reason) {
	case reasons.RequestNotFound:
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such request.")
	case reasons.SelfApproval:
		h.errorPage(w, r, http.StatusForbidden, "Not allowed", "You made this call: someone else must approve it.")
	case reasons.RoleNotAllowed, reasons.NotAllowed, reasons.NotRequester:
		h.errorPage(w, r, http.StatusForbidden, "Not allowed", "You may not decide this request.")
	case reasons.AlreadyDecided, reasons.InvalidTransition:
		h.errorPage(w, r, http.StatusConflict, "Already decided", "This request has been decided already; a decision is made once.")
	default:
		status := e.HTTPStatus()
		if errors.Is(err, gates.ErrNotFound) {
			status = http.StatusNotFound
		}
		h.errorPage(w, r, status, "Refused", e.Message)
	}
}
