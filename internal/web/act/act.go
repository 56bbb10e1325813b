// Package act serves the action links of notification emails (SPEC §12),
// /act/<token>: GET and HEAD show what is asked and change nothing,
// whoever fetches them (mail scanners, chat unfurlers); only the page's own
// POST decides, as the link's recipient, through the Decider like every
// other channel. The token is the credential: no session, never logged
// (the server logs the route), never sent on as a Referer. It declares the
// Store it uses; it imports the request and response kernels, never
// another handler package nor internal/web.
package act

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/static"
	"github.com/gatehousehq/gatehouse/views"
)

// actTokenRe is the shape of a token: 256 bits in base64url.
var actTokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// actFormKey is the confirmation form's anti-forgery field: bound to the
// token (its key) and to what the link decides, so that only a page
// rendered for this link can post it.
func actFormKey(token string, l *notify.ActionLink) string {
	m := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(m, "act-form:%s:%s", l.InterruptID, l.Recipient)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Store is what the action links read and write (postgres.Store).
type Store interface {
	// ActionLink errors: notify.ErrNotFound.
	ActionLink(ctx context.Context, hash []byte) (*notify.ActionLink, error)
	SpendActionLink(ctx context.Context, hash []byte) (bool, error)
	DecisionSubject(ctx context.Context, taskID, interruptID string) (*graph.Task, *graph.Interrupt, error)
	Decisions(ctx context.Context, taskID string) ([]graph.Decision, error)
	Approvals(ctx context.Context, interruptID string) ([]string, error)
	// UserByName errors: auth.ErrNotFound.
	UserByName(ctx context.Context, username string) (*auth.User, error)
}

// Router adds a route with the least role it needs ("" public): the
// server's, which keeps every route's role.
type Router interface {
	Route(method, path string, role auth.Role, h echo.HandlerFunc)
}

// Deps is what the action links need.
type Deps struct {
	Store   Store
	Decider *auth.Decider
	Assets  *static.Assets
	// Page wraps a page handler: a post from another origin is refused,
	// and an error becomes the site's HTML error page.
	Page func(echo.HandlerFunc) echo.HandlerFunc
	// Errors is Page without the origin check and without the check of
	// the form's text: for the link's POST, which checks its own text
	// (actPost) to show the form again with what was typed.
	Errors func(echo.HandlerFunc) echo.HandlerFunc
	Logger *slog.Logger
}

// Handler serves /act/:token.
type Handler struct {
	store   Store
	decider *auth.Decider
	assets  *static.Assets
	page    func(echo.HandlerFunc) echo.HandlerFunc
	errors  func(echo.HandlerFunc) echo.HandlerFunc
	log     *slog.Logger
	md      *markdown.Renderer
}

// New returns the handler.
func New(d Deps) *Handler {
	h := &Handler{store: d.Store, decider: d.Decider, assets: d.Assets, page: d.Page, errors: d.Errors, log: d.Logger,
		md: markdown.New()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Register adds GET, HEAD and POST /act/:token: public, the token is the
// credential.
func (h *Handler) Register(r Router) {
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.Route(m, "/act/:token", "", h.page(h.actPage))
	}
	// The POST is not held to the desk's origin check: the page sends
	// Referrer-Policy: no-referrer, so Chromium posts it with Origin:
	// null. The token is the credential, and the form's field bound to
	// it (actFormKey) the anti-forgery check: another site has neither.
	r.Route(http.MethodPost, "/act/:token", "", h.errors(h.actPost))
}

// actHeaders keep the token where it is: no Referer to anything the page
// links, no cache, no index.
func actHeaders(c echo.Context) {
	h := c.Response().Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Robots-Tag", "noindex, nofollow")
}

// actLink is a link with what it is about, as just read.
type actLink struct {
	token string
	link  *notify.ActionLink
	task  *graph.Task
	itr   *graph.Interrupt
	// posted is a refused typed answer's input, kept for the form again,
	// with its problems by field (SPEC §17).
	posted   url.Values
	problems map[string]string
}

// loadAct reads the link of the request's token: 404 when unknown.
func (h *Handler) loadAct(c echo.Context) (*actLink, error) {
	token := c.Param("token")
	if !actTokenRe.MatchString(token) {
		return nil, &response.Error{Status: http.StatusNotFound, Code: response.CodeNotFound, Message: "This link is not known. Check that it was not cut short."}
	}
	ctx := c.Request().Context()
	l, err := h.store.ActionLink(ctx, notify.TokenHash(token))
	if errors.Is(err, notify.ErrNotFound) {
		return nil, &response.Error{Status: http.StatusNotFound, Code: response.CodeNotFound, Message: "This link is not known. Check that it was not cut short."}
	}
	if err != nil {
		return nil, err
	}
	t, itr, err := h.store.DecisionSubject(ctx, l.TaskID, l.InterruptID)
	if errors.Is(err, graph.ErrTaskNotFound) || err == nil && itr == nil {
		return nil, &response.Error{Status: http.StatusNotFound, Code: response.CodeNotFound, Message: "The task of this link no longer exists."}
	}
	if err != nil {
		return nil, err
	}
	return &actLink{token: token, link: l, task: t, itr: itr}, nil
}

// ended says why a link no longer decides ("" while it does).
func (h *Handler) ended(c echo.Context, a *actLink) (string, error) {
	kind := notify.KindLabel(a.itr.Kind)
	switch a.itr.Status {
	case graph.InterruptResolved:
		decs, err := h.store.Decisions(c.Request().Context(), a.task.ID)
		if err != nil {
			return "", err
		}
		for _, dec := range decs {
			if dec.InterruptID == a.itr.ID {
				msg := fmt.Sprintf("%s %s this %s at %s.", dec.DecidedBy, response.Verb(dec.Action), kind,
					dec.DecidedAt.UTC().Format("2006-01-02 15:04:05 MST"))
				if dec.Feedback != "" {
					msg += " Feedback: " + dec.Feedback
				}
				return msg, nil
			}
		}
		return fmt.Sprintf("This %s was decided.", kind), nil
	case graph.InterruptExpired:
		return fmt.Sprintf("This %s expired at %s: its deadline passed.", kind, stampOr(a.itr.ResolvedAt)), nil
	case graph.InterruptCancelled:
		return fmt.Sprintf("This %s was withdrawn at %s (the task was cancelled or moved on).", kind, stampOr(a.itr.ResolvedAt)), nil
	}
	if u := a.link.UsedAt; u != nil {
		approvers, err := h.store.Approvals(c.Request().Context(), a.itr.ID)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s used this link at %s. The %s still waits (%s); the others who may decide have their own links.",
			a.link.Recipient, u.UTC().Format("2006-01-02 15:04:05 MST"), kind,
			auth.Progress(len(approvers), h.decider.Policy().RequiredFor(a.task, a.itr))), nil
	}
	if !time.Now().Before(a.link.ExpiresAt) {
		return fmt.Sprintf("This link ended at %s. The %s still waits: decide on the task page.",
			a.link.ExpiresAt.UTC().Format("2006-01-02 15:04:05 MST"), kind), nil
	}
	return "", nil
}

// claimNote says who holds an interrupt's claim and until when.
func claimNote(itr *graph.Interrupt) string {
	until := ""
	if itr.ClaimExpiresAt != nil {
		until = " until " + itr.ClaimExpiresAt.UTC().Format("15:04 MST")
	}
	return fmt.Sprintf("%s has claimed this %s%s: only they may decide it while they hold it. "+
		"This link keeps working: use it once they release the claim or it ends.", itr.ClaimedBy, notify.KindLabel(itr.Kind), until)
}

func stampOr(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST")
}

func (h *Handler) actGone(c echo.Context, a *actLink, msg string) error {
	return h.actDone(c, http.StatusGone, a, "This link has been used or has ended", msg)
}

func (h *Handler) actDone(c echo.Context, status int, a *actLink, title, msg string) error {
	actHeaders(c)
	p := views.ActDone{Title: title, Message: msg, TaskTitle: a.task.Title, TaskURL: "/tasks/" + a.task.ID,
		CSS: h.assets.URL("app.css"), Icon: h.assets.URL("favicon.svg")}
	return response.Page(c, status, views.ActDoneView(p))
}

// actPage: GET and HEAD /act/:token. It changes nothing.
func (h *Handler) actPage(c echo.Context) error {
	actHeaders(c)
	a, err := h.loadAct(c)
	if err != nil {
		return err
	}
	msg, err := h.ended(c, a)
	if err != nil {
		return err
	}
	if msg != "" {
		return h.actGone(c, a, msg)
	}
	return h.actForm(c, http.StatusOK, a, "", "")
}

func (h *Handler) actForm(c echo.Context, status int, a *actLink, errMsg, feedback string) error {
	itr := a.itr
	p := views.ActPage{Title: notify.KindLabel(itr.Kind) + " waits for your decision", Recipient: a.link.Recipient,
		TaskTitle: a.task.Title, Workflow: a.task.Workflow, Kind: itr.Kind, Ask: itr.Payload.Title, Question: itr.Payload.Question,
		Action: "/act/" + a.token, FormKey: actFormKey(a.token, a.link), Error: errMsg, Feedback: feedback,
		CSS: h.assets.URL("app.css"), Icon: h.assets.URL("favicon.svg")}
	if itr.Deadline != nil {
		p.Deadline = itr.Deadline.UTC().Format("2006-01-02 15:04 MST")
	}
	if art := itr.Payload.Artifact; art != nil {
		p.ArtifactName, p.ArtifactContent = art.Name, art.Content
		if markdown.Is(art.ContentType) {
			p.ArtifactHTML = views.SafeHTML(h.md.HTML(art.Content))
		}
	}
	for _, act := range itr.Payload.Actions {
		// An edit needs the desk's editor: the link offers the rest.
		if act != graph.ActionEdit {
			p.Actions = append(p.Actions, act)
		}
	}
	if itr.ClaimedBy != "" && itr.ClaimedBy != a.link.Recipient {
		p.Claim = claimNote(itr)
	}
	asked, err := response.AskedOf(a.task, h.md)
	if err != nil {
		return err
	}
	if asked != nil {
		p.Request = &asked.Info
		if slices.Contains(p.Actions, graph.ActionRespond) {
			p.Fields = response.AnswerFields(asked.Form, a.posted, a.problems)
		}
	}
	if n := h.decider.Policy().RequiredFor(a.task, itr); n > 1 {
		approvers, err := h.store.Approvals(c.Request().Context(), itr.ID)
		if err != nil {
			return err
		}
		p.Progress = auth.Progress(len(approvers), n)
	}
	actHeaders(c)
	return response.Page(c, status, views.ActView(p))
}

// badText refuses a posted form with text PostgreSQL cannot store
// (U+0000, invalid UTF-8; pgtext): the form again (400) with the message
// naming the field and what was typed kept, with U+FFFD where it could
// not be shown; refused false when the text is fine.
func (h *Handler) badText(c echo.Context, a *actLink) (refused bool, err error) {
	form := c.Request().PostForm
	name, problem := pgtext.Values(form)
	if problem == "" {
		return false, nil
	}
	kept := url.Values{}
	for k, vs := range form {
		for _, v := range vs {
			kept.Add(pgtext.Shown(k), pgtext.Shown(v))
		}
	}
	msg := "Not recorded: the form " + problem + "."
	if name != "" {
		msg = "Not recorded: " + name + " " + problem + "; it is shown as \uFFFD: remove it and send again."
	}
	a.posted = kept
	if field, ok := strings.CutPrefix(name, "answer."); ok {
		a.problems = map[string]string{field: "This " + problem + "; it is shown as \uFFFD: remove it."}
	}
	return true, h.actForm(c, http.StatusBadRequest, a, msg, kept.Get("feedback"))
}

// actPost: POST /act/:token decides as the link's recipient.
func (h *Handler) actPost(c echo.Context) error {
	actHeaders(c)
	a, err := h.loadAct(c)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(c.FormValue("_act")), []byte(actFormKey(a.token, a.link))) {
		return &response.Error{Status: http.StatusForbidden, Code: response.CodeForbidden,
			Message: "This form did not come from the link's own page; open the link again."}
	}
	msg, err := h.ended(c, a)
	if err != nil {
		return err
	}
	if msg != "" {
		return h.actGone(c, a, msg)
	}
	if refused, err := h.badText(c, a); refused || err != nil {
		return err
	}
	ctx := c.Request().Context()
	action, feedback := strings.TrimSpace(c.FormValue("action")), c.FormValue("feedback")
	if action == graph.ActionEdit {
		return h.actForm(c, http.StatusUnprocessableEntity, a, "An edit needs the task page's editor.", feedback)
	}
	u, err := h.store.UserByName(ctx, a.link.Recipient)
	if errors.Is(err, auth.ErrNotFound) || err == nil && u.Disabled {
		return h.actForm(c, http.StatusForbidden, a, a.link.Recipient+" is disabled or no longer exists: this link decides nothing.", feedback)
	}
	if err != nil {
		return err
	}
	p := auth.UserPrincipal(*u)
	in := graph.DecisionInput{InterruptID: a.itr.ID, Action: action, Feedback: feedback}
	// A typed answer's controls (SPEC §17), read into typed JSON: the
	// Decider checks it against the request's schema.
	var asked *response.Asked
	var conv map[string]string
	if action == graph.ActionRespond {
		if asked, err = response.AskedOf(a.task, h.md); err != nil {
			return err
		}
		if asked != nil && asked.Form != nil {
			in.Value, conv = asked.Form.Collect(c.Request().Form)
		}
	}
	out, derr := h.decider.DecideOn(ctx, p, auth.Subject{Task: a.task, Interrupt: a.itr}, in)
	var ae *auth.AnswerError
	var (
		fb *auth.ForbiddenError
		ve *graph.ValidationError
		cf *graph.ConflictError
	)
	switch {
	case derr == nil:
	case errors.As(derr, &fb):
		return h.actForm(c, http.StatusForbidden, a, fb.Reason, feedback)
	case errors.As(derr, &ae) && asked != nil && asked.Form != nil:
		a.posted, a.problems = c.Request().Form, response.AnswerProblems(asked.Form, ae, conv)
		msg := a.problems[""]
		if msg == "" {
			msg = response.AnswerNotRecorded
		}
		return h.actForm(c, http.StatusUnprocessableEntity, a, msg, feedback)
	case errors.As(derr, &ve):
		return h.actForm(c, http.StatusUnprocessableEntity, a, response.DecisionMessage(ve), feedback)
	case errors.As(derr, &cf) && cf.Holder != "":
		// Someone else holds the claim (SPEC §11): refused with the
		// reason, nothing recorded, and the link stays as it was, to be
		// used once the claim is released or ends.
		fresh, err := h.loadAct(c)
		if err != nil {
			return err
		}
		if msg, err := h.ended(c, fresh); err != nil || msg != "" {
			if err != nil {
				return err
			}
			return h.actGone(c, fresh, msg)
		}
		if fresh.itr.ClaimedBy == "" {
			// Released between the refusal and this read.
			fresh.itr.ClaimedBy = cf.Holder
		}
		return h.actForm(c, http.StatusConflict, fresh, "Not recorded: "+claimNote(fresh.itr), feedback)
	case errors.As(derr, &cf):
		fresh, err := h.loadAct(c)
		if err != nil {
			return err
		}
		msg, err := h.ended(c, fresh)
		if err != nil {
			return err
		}
		if msg == "" {
			msg = "That decision is no longer open."
		}
		return h.actGone(c, fresh, msg)
	default:
		return derr
	}
	// Decided (or one approval of several): the link is spent.
	if _, err := h.store.SpendActionLink(ctx, notify.TokenHash(a.token)); err != nil {
		h.log.Warn("spending an action link", "interrupt", a.itr.ID, "error", err)
	}
	kind := notify.KindLabel(a.itr.Kind)
	if out.Pending() {
		return h.actDone(c, http.StatusOK, a, "Your approval is recorded",
			fmt.Sprintf("%s approved this %s (%s); it waits for another approver.", p.Name, kind, out.Progress()))
	}
	return h.actDone(c, http.StatusOK, a, "Decided",
		fmt.Sprintf("%s %s this %s at %s.", p.Name, response.Verb(out.Decision.Action), kind,
			out.Decision.DecidedAt.UTC().Format("2006-01-02 15:04:05 MST")))
}
