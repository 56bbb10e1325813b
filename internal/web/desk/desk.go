package desk

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/static"
	"github.com/gatehousehq/gatehouse/views"
)

// desk is the approval desk: the server-rendered pages of SPEC §8 and their
// live feeds. Handlers load, build a view model, render into a buffer and
// write it with its status; the views decide nothing.
type desk struct {
	s      *env
	router Router
	assets *static.Assets
	render *renderer
	tasks  *taskCache
	feeds  *feeds
	lists  *listCache
	// presences is who has each task page open, per task.
	presences *presences
}

// Register adds the pages, their forms, their websockets and the
// static files. Every page and feed needs a session (the login page is
// where there is none) and declares its least role; every form post
// carries the session's CSRF token.
func (h *Handler) Register(r Router) {
	d, s := h.d, h.d.s
	d.router = r
	get, post := http.MethodGet, http.MethodPost
	viewer, operator, approver, admin := auth.RoleViewer, auth.RoleOperator, auth.RoleApprover, auth.RoleAdmin
	r.Handle(get, static.Prefix+"*", "", echo.WrapHandler(d.assets))
	d.route(get, "/login", "", d.loginPage, true)
	d.formRoute(post, "/login", "", d.login)
	d.route(post, "/logout", viewer, d.logout, true)
	if s.sso != nil {
		d.route(post, sso.StartPath, "", d.ssoStart, true)
		d.route(get, sso.CallbackPath, "", d.ssoCallback, true)
	}
	d.route(get, "/", viewer, d.dashboard, true)
	d.route(get, "/inbox", viewer, d.inbox, true)
	d.route(get, "/tasks/new", operator, d.newTaskForm, true)
	d.formRoute(post, "/tasks/new", operator, d.createTaskForm)
	d.route(get, "/tasks/:id", viewer, d.taskPage, true)
	d.route(post, "/tasks/:id/decide", approver, d.decideForm, true)
	d.route(post, "/tasks/:id/claim", approver, d.claimForm, true)
	d.route(post, "/tasks/:id/cancel", operator, d.cancelForm, true)
	d.route(post, "/tasks/:id/retry", operator, d.retryForm, true)
	d.route(get, "/tasks/:id/fork", operator, d.forkPage, true)
	d.formRoute(post, "/tasks/:id/fork", operator, d.forkForm)
	d.route(get, "/tasks/:id/live", viewer, d.taskLive, false)
	d.route(get, "/live/dashboard", viewer, d.dashboardLive, false)
	d.route(get, "/live/inbox", viewer, d.inboxLive, false)
	d.route(get, "/live/session", viewer, d.sessionCheck, false)
	d.route(get, "/account", viewer, d.accountPage, true)
	d.formRoute(post, "/account/password", viewer, d.passwordForm)
	d.route(get, "/analytics", viewer, d.analyticsPage, true)
	d.route(get, "/analytics/tasks", viewer, d.analyticsTasks, true)
	d.route(get, "/audit", admin, d.auditPage, true)
	d.route(get, "/admin/users", admin, d.usersPage, true)
	d.route(get, "/admin/policy", admin, d.policyPage, true)
	d.formRoute(post, "/admin/users", admin, d.addUserForm)
	d.formRoute(post, "/admin/users/:name", admin, d.userForm)
	d.route(get, "/admin/tokens", admin, d.tokensPage, true)
	d.formRoute(post, "/admin/tokens", admin, d.createTokenForm)
	d.route(post, "/admin/tokens/:id/revoke", admin, d.revokeTokenForm, true)
	d.registerWebhooks()
}

// page adapts a page handler: a state-changing request from another origin
// is refused, and an error becomes an HTML error page with its status.
func (d *desk) page(h echo.HandlerFunc) echo.HandlerFunc { return d.sameOrigin(d.pageErrors(h)) }

// sameOrigin refuses a state-changing request from another origin with
// an error page.
func (d *desk) sameOrigin(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodPost && !request.SameOrigin(c.Request()) {
			return d.errorPage(c, &response.Error{Status: http.StatusForbidden, Code: response.CodeForbidden,
				Message: "This form was sent from another site."})
		}
		return h(c)
	}
}

// pageErrors adapts a page handler without the origin check: an error
// becomes an HTML error page with its status. Only for forms that carry
// their own credential (an action link's token).
//
// A query string or a posted form with text PostgreSQL cannot store
// (U+0000, invalid UTF-8) is refused here for every page, 400 naming the
// parameter or field, before the handler runs: nothing changes. A form
// posted by htmx keeps what was typed (a 400 is not swapped) and app.js
// shows the message in it.
func (d *desk) pageErrors(h echo.HandlerFunc) echo.HandlerFunc { return d.errorPages(h, true) }

// errorPages is pageErrors; checkForm false leaves the posted form's text
// to the handler (formRoute).
func (d *desk) errorPages(h echo.HandlerFunc, checkForm bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := request.CheckURL(c); err != nil {
			return d.errorPage(c, err)
		}
		if checkForm {
			if err := request.CheckForm(c); err != nil {
				return d.errorPage(c, err)
			}
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
	e := response.Of(err)
	status := e.Status
	if status == response.StatusClientGone {
		return nil
	}
	if status >= 500 {
		d.s.log.Error("page failed", "path", request.LogPath(c.Request()), "error", err)
	}
	heading := http.StatusText(status)
	msg := e.Message
	switch status {
	case http.StatusNotFound:
		heading, msg = "Not found", "There is nothing here. The task may have been removed, or the link is wrong."
	case http.StatusInternalServerError:
		heading, msg = "Something went wrong", "The page could not be shown. Try again in a moment."
	}
	return response.Page(c, status, views.ErrorView(views.ErrorPage{Page: d.pageMeta(c.Request().Context(), heading, ""),
		Status: status, Heading: heading, Message: msg}))
}

// pageMeta is what every page's frame needs. The inbox count is best
// effort: a failure shows no count rather than no page.
func (d *desk) pageMeta(ctx context.Context, title, nav string) views.Page {
	n, err := d.pendingCount(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		d.s.log.Warn("inbox count", "error", err)
	}
	return withUser(ctx, views.Page{Title: title, Nav: nav, InboxCount: n, Assets: d.assets})
}

// withUser puts the signed-in user and the session's CSRF token in a
// page's frame.
func withUser(ctx context.Context, p views.Page) views.Page {
	if u := userOf(ctx); !u.p.IsZero() {
		p.CSRF = u.csrf
		p.User = &views.PageUser{Name: u.p.Name, Role: string(u.p.Role), Operator: u.p.Can(auth.RoleOperator),
			Admin: u.p.Can(auth.RoleAdmin)}
	}
	return p
}
