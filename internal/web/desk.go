package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/static"
	"github.com/gatehousehq/gatehouse/views"
)

// desk is the approval desk: the server-rendered pages of SPEC §8 and their
// live feeds. Handlers load, build a view model, render into a buffer and
// write it with its status; the views decide nothing.
type desk struct {
	s      *Server
	assets *static.Assets
	render *renderer
	tasks  *taskCache
	feeds  *feeds
	lists  *listCache
}

// registerDesk adds the pages, their forms, their websockets and the
// static files. The pages need no bearer token (sessions come later); the
// JSON API keeps its own.
func (s *Server) registerDesk() {
	d := &desk{s: s, assets: static.MustLoad(), render: newRenderer()}
	d.tasks = newTaskCache(d, 256)
	d.feeds = &feeds{d: d, m: map[string]*taskFeed{}}
	d.lists = newListCache()
	e := s.e
	e.GET(static.Prefix+"*", echo.WrapHandler(d.assets))
	e.GET("/", d.page(d.dashboard))
	e.GET("/inbox", d.page(d.inbox))
	e.GET("/tasks/new", d.page(d.newTaskForm))
	e.POST("/tasks/new", d.page(d.createTaskForm))
	e.GET("/tasks/:id", d.page(d.taskPage))
	e.POST("/tasks/:id/decide", d.page(d.decideForm))
	e.POST("/tasks/:id/cancel", d.page(d.cancelForm))
	e.POST("/tasks/:id/retry", d.page(d.retryForm))
	e.GET("/tasks/:id/live", d.taskLive)
	e.GET("/live/dashboard", d.dashboardLive)
	e.GET("/live/inbox", d.inboxLive)
}

// page adapts a page handler: a state-changing request from another origin
// is refused, and an error becomes an HTML error page with its status.
func (d *desk) page(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodPost && !sameOrigin(c.Request()) {
			return d.errorPage(c, &Error{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: "This form was sent from another site."})
		}
		err := h(c)
		if err == nil || c.Response().Committed {
			return err
		}
		return d.errorPage(c, err)
	}
}

// errorPage renders err as a page. 5xx causes are logged here (the client
// sees a message only).
func (d *desk) errorPage(c echo.Context, err error) error {
	e := errorOf(err)
	status := e.Status
	if status == statusClientGone {
		return nil
	}
	if status >= 500 {
		d.s.log.Error("page failed", "path", c.Request().URL.Path, "error", err)
	}
	heading := http.StatusText(status)
	msg := e.Message
	switch status {
	case http.StatusNotFound:
		heading, msg = "Not found", "There is nothing here. The task may have been removed, or the link is wrong."
	case http.StatusInternalServerError:
		heading, msg = "Something went wrong", "The page could not be shown. Try again in a moment."
	}
	return d.write(c, status, views.ErrorView(views.ErrorPage{Page: d.pageMeta(c.Request().Context(), heading, ""),
		Status: status, Heading: heading, Message: msg}))
}

// contentSecurityPolicy allows this origin only: no inline script or
// style, no eval, no frames. The pages are built for it (htmx runs with
// allowEval off and its injected styles off).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// write renders comp into a buffer, then writes it with status: a render
// error never leaves half a page behind a 200.
func (d *desk) write(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	return c.HTMLBlob(status, buf.Bytes())
}

// pageMeta is what every page's frame needs. The inbox count is best
// effort: a failure shows no count rather than no page.
func (d *desk) pageMeta(ctx context.Context, title, nav string) views.Page {
	n, err := d.pendingCount(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		d.s.log.Warn("inbox count", "error", err)
	}
	return views.Page{Title: title, Nav: nav, InboxCount: n, Assets: d.assets}
}

// isHX reports an htmx request.
func isHX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// sameOrigin reports whether a request comes from one of our pages: an
// Origin header, when the browser sends one, names this host; otherwise
// Fetch metadata does not say cross-site. (Sessions with a CSRF token come
// with users.)
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && strings.EqualFold(u.Host, r.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") != "cross-site"
}

// --- who acts ---
//
// Until users and sessions exist (issue 6), the desk knows a person by the
// name they type once, kept in a cookie. Everything that needs "who" goes
// through actorOf, so sessions replace this one place.

const (
	reviewerCookie = "gatehouse_reviewer"
	maxReviewer    = 80
)

// reviewer is the remembered name, or "".
func reviewer(r *http.Request) string {
	ck, err := r.Cookie(reviewerCookie)
	if err != nil {
		return ""
	}
	v, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return ""
	}
	if name, ok := cleanName(v); ok {
		return name
	}
	return ""
}

// actor is who performs a form's action: the decided_by field when the
// form has one, else the remembered name. It returns a message for the
// field when there is no usable name.
func actorOf(c echo.Context) (string, string) {
	raw := c.FormValue("decided_by")
	if strings.TrimSpace(raw) == "" {
		if r := reviewer(c.Request()); r != "" {
			return r, ""
		}
		return "", "Enter your name: it is recorded with your decision."
	}
	name, ok := cleanName(raw)
	if !ok {
		return "", fmt.Sprintf("Use up to %d characters of text for your name.", maxReviewer)
	}
	return name, ""
}

// rememberName keeps the name for the next forms of this browser.
func rememberName(c echo.Context, name string) {
	c.SetCookie(&http.Cookie{Name: reviewerCookie, Value: url.QueryEscape(name), Path: "/", MaxAge: 365 * 24 * 3600,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.Request().TLS != nil})
}

// cleanName is a name on one line without control characters.
func cleanName(s string) (string, bool) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" || utf8.RuneCountInString(s) > maxReviewer || !utf8.ValidString(s) {
		return "", false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "", false
		}
	}
	return s, true
}

// startedBy is the created_by of a task started from the desk.
func startedBy(r *http.Request) string {
	if n := reviewer(r); n != "" {
		return n
	}
	return "desk"
}
