package desk

// The desk's side of who acts: every page needs a session (else the login
// page), every route its least role, every form post its session's CSRF
// token; the login and logout pages; and what the decision area offers
// the person looking at it.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// ctxKey carries the desk's principal in the request context, for code
// that has a context but no echo.Context (page frames).
type ctxKey struct{}

// deskUser is who looks at a desk page: the principal and the session's
// CSRF token.
type deskUser struct {
	p    auth.Principal
	csrf string
}

// userOf is the page's user (zero outside a session).
func userOf(ctx context.Context) deskUser {
	u, _ := ctx.Value(ctxKey{}).(deskUser)
	return u
}

// deskRoute registers a desk route: a session of at least role (none for
// "", a public route), and the CSRF token on every post. Pages (page true)
// answer errors as HTML pages.
func (d *desk) route(method, path string, role auth.Role, h echo.HandlerFunc, page bool) {
	if role != "" {
		h = d.guard(role, h)
	}
	if page {
		h = d.page(h)
	} else {
		// Live feeds read filters too; a page checks its query in
		// pageErrors.
		next := h
		h = func(c echo.Context) error {
			if err := request.CheckURL(c); err != nil {
				return err
			}
			return next(c)
		}
	}
	d.router.Handle(method, path, role, h)
}

// formRoute registers a page that posts a form whose handler reads it and
// checks its text itself (pgtext), so that text that
// cannot be stored comes back as an error beside its field with
// everything typed kept, rather than as an error page: the new-task and
// fork forms, the sign-in, user, token, password and webhook forms.
func (d *desk) formRoute(method, path string, role auth.Role, h echo.HandlerFunc) {
	if role != "" {
		h = d.guard(role, h)
	}
	d.router.Handle(method, path, role, d.sameOrigin(d.errorPages(h, false)))
}

// unstorable is the message of a posted form whose text cannot be stored
// (U+0000, invalid UTF-8: pgtext), naming the field; "" when there is
// none. For the handlers of formRoute, which show their form again with
// it (and what was typed, through pgtext.Shown).
func unstorable(c echo.Context) string {
	if _, err := c.FormParams(); err != nil {
		return ""
	}
	name, problem := pgtext.Values(c.Request().PostForm)
	switch {
	case problem == "":
		return ""
	case name == "":
		return "Nothing was changed: the form " + problem + "."
	}
	return "Nothing was changed: " + name + " " + problem + "; correct it and send it again."
}

// guard loads the session and checks it: none (or an ended one) → the
// login page; a role below min → 403; a post without the session's CSRF
// token → 403, before anything else about the request.
func (d *desk) guard(min auth.Role, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ok, err := d.s.fromSession(c)
		if err != nil {
			return err
		}
		if !ok {
			return d.loginRequired(c)
		}
		p, sess := request.Principal(c), request.Session(c)
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), ctxKey{}, deskUser{p: p, csrf: auth.CSRFToken(sess.CSRFKey)})))
		if !request.SafeMethod(r.Method) && !request.CSRFValid(c, sess) {
			var maxErr *http.MaxBytesError
			if errors.As(c.Request().ParseForm(), &maxErr) {
				return response.TooLarge()
			}
			return response.CSRFRefused()
		}
		if !p.Can(min) {
			return response.ForbiddenRole(p, min)
		}
		return next(c)
	}
}

// loginRequired answers a request without a valid session: pages go to
// the login page (and come back after), htmx requests are told to go
// there, anything else is 401.
func (d *desk) loginRequired(c echo.Context) error {
	r := c.Request()
	switch {
	case request.IsHX(c):
		next := "/"
		if u, err := url.Parse(r.Header.Get("HX-Current-URL")); err == nil {
			next = localPath(u.RequestURI())
		}
		c.Response().Header().Set("HX-Redirect", "/login?"+url.Values{"next": {next}}.Encode())
		return c.NoContent(http.StatusUnauthorized)
	case r.Method == http.MethodGet && r.Header.Get("Upgrade") == "":
		return c.Redirect(http.StatusSeeOther, "/login?"+url.Values{"next": {localPath(r.URL.RequestURI())}}.Encode())
	}
	return &response.Error{Status: http.StatusUnauthorized, Code: response.CodeUnauthorized, Message: "Sign in first."}
}

// sessionCheck: GET /live/session — whether the page's session still
// holds. Browsers hide why a websocket handshake failed: a live page whose
// session ended while its socket was down (a restart, a laptop asleep)
// sees a bare 1006, which htmx-ext-ws retries forever. After such a close
// the page asks here as an htmx request, so an ended session is a 401
// naming the login page (HX-Redirect, by loginRequired), not a redirect
// the browser would follow silently. A session that holds is 200.
func (d *desk) sessionCheck(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	p := request.Principal(c)
	return c.JSON(http.StatusOK, map[string]string{"user": p.Name, "role": string(p.Role)})
}

// --- login and logout ---

// The login form carries a token that matches a cookie of its own
// (SameSite=Strict), so another site cannot sign a browser in to an
// account of its choosing.
const (
	loginCookie   = "gatehouse_login"
	loginTokenLen = 43
)

func (d *desk) loginToken(c echo.Context) string {
	if ck, err := c.Cookie(loginCookie); err == nil && len(ck.Value) == loginTokenLen {
		return ck.Value
	}
	tok := auth.RandomToken()
	c.SetCookie(&http.Cookie{Name: loginCookie, Value: tok, Path: "/login", HttpOnly: true,
		Secure: d.s.secure(c.Request()), SameSite: http.SameSiteStrictMode})
	return tok
}

// loginPage: GET /login — the form; a signed-in visitor goes on.
func (d *desk) loginPage(c echo.Context) error {
	next := localPath(c.QueryParam("next"))
	if ok, err := d.s.fromSession(c); err == nil && ok {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return d.writeLogin(c, http.StatusOK, views.LoginPage{Next: next, Message: d.s.takeFlash(c)})
}

func (d *desk) writeLogin(c echo.Context, status int, l views.LoginPage) error {
	l.Page = views.Page{Title: "Sign in", Assets: d.assets}
	if d.s.sso != nil {
		l.SSOName, l.SSOReady = d.s.sso.Name(), d.s.sso.Ready()
		if o := d.s.sso.AuthOrigin(); o != "" {
			// "Sign in with …" posts here and is redirected to the
			// provider: the one other place this page's form may lead.
			c.Response().Header().Set("Content-Security-Policy",
				strings.Replace(response.ContentSecurityPolicy, "form-action 'self'", "form-action 'self' "+o, 1))
		}
	}
	l.Password = d.s.auth.LocalLogin()
	l.BreakGlass = !l.Password && d.s.auth.BreakGlassUser() != ""
	l.CSRF = d.loginToken(c)
	return response.Page(c, status, views.LoginView(l))
}

// login: POST /login — checks the user name and password (throttled per
// user name and address: 429), opens a session and goes to next.
func (d *desk) login(c echo.Context) error {
	form := views.LoginPage{Next: localPath(c.FormValue("next")), Username: strings.TrimSpace(c.FormValue("username"))}
	ck, err := c.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.FormValue(request.CSRFField))) != 1 {
		form.Error = "The sign-in form expired. Try again."
		return d.writeLogin(c, http.StatusForbidden, form)
	}
	if msg := unstorable(c); msg != "" {
		form.Username, form.Next, form.Error = pgtext.Shown(form.Username), localPath(pgtext.Shown(form.Next)), msg
		return d.writeLogin(c, http.StatusBadRequest, form)
	}
	r := c.Request()
	l, err := d.s.auth.Login(r.Context(), form.Username, c.FormValue("password"), d.s.clientAddr(r), r.UserAgent())
	var th *auth.ThrottledError
	switch {
	case errors.As(err, &th):
		c.Response().Header().Set("Retry-After", fmt.Sprint(int(th.RetryAfter.Seconds()+0.999)))
		form.Error = fmt.Sprintf("Too many failed attempts. Try again in %s.", humanDuration(th.RetryAfter))
		return d.writeLogin(c, http.StatusTooManyRequests, form)
	case errors.Is(err, auth.ErrBadCredentials):
		form.Error = "Wrong user name or password."
		return d.writeLogin(c, http.StatusUnauthorized, form)
	case errors.Is(err, auth.ErrLocalLoginOff):
		form.Error = "Password sign-in is turned off here; only the break-glass account may use it. Sign in with single sign-on."
		return d.writeLogin(c, http.StatusForbidden, form)
	case err != nil:
		return err
	}
	d.s.setSessionCookie(c, l.Secret)
	return c.Redirect(http.StatusSeeOther, form.Next)
}

// logout: POST /logout — ends the session on the server and forgets the
// cookie.
func (d *desk) logout(c echo.Context) error {
	if sess := request.Session(c); sess != nil {
		if err := d.s.auth.Logout(c.Request().Context(), sess.ID, request.Principal(c).Name); err != nil {
			return err
		}
	}
	d.s.clearSessionCookie(c)
	d.s.setFlash(c, "You are signed out.")
	return c.Redirect(http.StatusSeeOther, "/login")
}

// accountPage: GET /account — who is signed in, and the form that
// changes their password.
func (d *desk) accountPage(c echo.Context) error {
	return d.writeAccount(c, http.StatusOK, views.AccountPage{})
}

func (d *desk) writeAccount(c echo.Context, status int, a views.AccountPage) error {
	a.Page = d.pageMeta(c.Request().Context(), "Your account", "account")
	return response.Page(c, status, views.AccountView(a))
}

// passwordForm: POST /account/password — current, password, repeat. A
// person changes only their own password here (an admin resets others'
// on the Users page); tokens have none.
func (d *desk) passwordForm(c echo.Context) error {
	me := request.Principal(c)
	if me.Kind != auth.KindUser {
		return d.writeAccount(c, http.StatusUnprocessableEntity, views.AccountPage{Error: "Only a user signed in with a password can change it."})
	}
	if msg := unstorable(c); msg != "" {
		return d.writeAccount(c, http.StatusBadRequest, views.AccountPage{Error: msg})
	}
	next := c.FormValue("password")
	if next != c.FormValue("repeat") {
		return d.writeAccount(c, http.StatusUnprocessableEntity, views.AccountPage{Error: "New password: the two entries differ. Type the same password twice."})
	}
	err := d.s.auth.ChangePassword(c.Request().Context(), me.Name, c.FormValue("current"), next)
	if errors.Is(err, auth.ErrBadCredentials) {
		return d.writeAccount(c, http.StatusUnprocessableEntity, views.AccountPage{Error: "Current password: that is not your password. Nothing was changed."})
	}
	if msg, ok := adminMessage(err); ok {
		return d.writeAccount(c, http.StatusUnprocessableEntity, views.AccountPage{Error: msg})
	}
	if err != nil {
		return err
	}
	// Every session of this user ended with the change: sign in again.
	d.s.clearSessionCookie(c)
	d.s.setFlash(c, "Your password is changed. Sign in with the new one.")
	return c.Redirect(http.StatusSeeOther, "/login")
}

// --- what the decision area offers ---

// areaCaps is what a person may do with the pending interrupt, and why
// not: the decision area is rendered once per distinct caps.
type areaCaps struct {
	decide  bool   // any decision at all
	approve bool   // approve
	edit    bool   // approve an edited version (not where several must approve)
	notice  string // why less than everything
	// others may approve what this viewer may not (separation of
	// duties); noOther: nobody may; usersLink: the viewer is an admin who
	// can add someone.
	others    []string
	noOther   bool
	usersLink bool
	// claim is the claim button: claim, release, take_over or "".
	claim string
}

func (a areaCaps) key() string {
	return fmt.Sprintf("%t|%t|%t|%s|%s|%t|%t|%s", a.decide, a.approve, a.edit, a.notice, strings.Join(a.others, ","), a.noOther,
		a.usersLink, a.claim)
}

// othersWhoMayApprove lists the enabled users the Decider would let
// approve the pending interrupt of td ("ann (approver)"): the same policy
// (roles, kinds, deciders, separation of duties) that will judge their
// approval. A failure to read the users leaves the list empty: the notice
// still says why the viewer may not approve.
func (d *desk) othersWhoMayApprove(ctx context.Context, td *taskData) []string {
	users, err := d.s.auth.Users(ctx)
	if err != nil {
		d.s.log.Warn("who may approve", "error", err)
		return nil
	}
	var out []string
	for _, u := range users {
		p := auth.UserPrincipal(u)
		if u.Disabled || d.s.decider.MayApprove(p, td.task, td.pending, td.approvals[td.pending.ID]) != nil {
			continue
		}
		out = append(out, u.Username+" ("+string(u.Role)+")")
	}
	return out
}

// capsFor is what p may do with the pending interrupt of td.
func (d *desk) capsFor(ctx context.Context, p auth.Principal, td *taskData) areaCaps {
	itr := td.pending
	if itr == nil {
		return areaCaps{}
	}
	dec := d.s.decider
	if err := dec.MayDecide(p, td.task, itr); err != nil {
		if !p.Can(auth.RoleApprover) {
			return areaCaps{notice: "You can follow this task; deciding needs the approver role."}
		}
		return areaCaps{notice: "Your role does not include " + itr.Kind + " decisions."}
	}
	// A claim of someone else's bars deciding (an admin may take it over).
	claim := "claim"
	switch {
	case itr.ClaimedBy == p.Name:
		claim = "release"
	case itr.ClaimedBy != "":
		claim = ""
		if p.Can(auth.RoleAdmin) {
			claim = "take_over"
		}
		return areaCaps{claim: claim, notice: "Claimed by " + itr.ClaimedBy + ": only they may decide it until they release it or the claim ends."}
	}
	caps := d.approveCaps(ctx, p, td)
	caps.claim = claim
	return caps
}

// approveCaps is capsFor for someone who may decide the interrupt.
func (d *desk) approveCaps(ctx context.Context, p auth.Principal, td *taskData) areaCaps {
	itr, dec := td.pending, d.s.decider
	if err := dec.MayApprove(p, td.task, itr, td.approvals[itr.ID]); err != nil {
		if dec.Policy().SeparateDuties(itr.Kind) && td.task.CreatedBy == p.Name {
			others := d.othersWhoMayApprove(ctx, td)
			return areaCaps{decide: true, notice: "You started this task, so separation of duties lets another approver, " +
				"not you, approve its " + itr.Kind + ". You may still reject it with feedback.",
				others: others, noOther: len(others) == 0, usersLink: p.Can(auth.RoleAdmin)}
		}
		return areaCaps{decide: true, notice: "You have approved this; another approver must give the next approval."}
	}
	return areaCaps{decide: true, approve: true, edit: dec.Policy().RequiredFor(td.task, itr) < 2}
}

// approvalsLine is the approval progress of the pending interrupt of a
// kind that needs several approvers ("1 of 2 approvals: ann"), else "".
func (d *desk) approvalsLine(td *taskData) string {
	itr := td.pending
	if itr == nil {
		return ""
	}
	n := d.s.decider.Policy().RequiredFor(td.task, itr)
	if n < 2 {
		return ""
	}
	who := td.approvals[itr.ID]
	line := auth.Progress(len(who), n)
	if len(who) > 0 {
		line += ": " + strings.Join(who, ", ")
	}
	return line
}

// withCaps limits the pending form to what caps allow.
func withCaps(p *views.PendingForm, caps areaCaps) {
	if p == nil {
		return
	}
	if !caps.decide {
		p.CanApprove, p.CanReject, p.CanEdit, p.CanRespond = false, false, false, false
	}
	if !caps.approve {
		p.CanApprove = false
	}
	if !caps.edit {
		p.CanEdit = false
	}
	p.Notice = caps.notice
	p.MayApprove, p.NoApprover, p.UsersLink = caps.others, caps.noOther, caps.usersLink
	p.ClaimAction = caps.claim
}
