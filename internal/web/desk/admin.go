package desk

// The administration pages (admin role): users, API tokens and the audit
// trail. Every change is recorded in the audit trail with its actor by the
// store, in the same statement.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

func roleNames() []string {
	out := make([]string, 0, len(auth.Roles))
	for _, r := range auth.Roles {
		out = append(out, string(r))
	}
	return out
}

// adminMessage words an administrative refusal for the page.
func adminMessage(err error) (string, bool) {
	var inv *auth.InvalidError
	switch {
	case errors.As(err, &inv):
		label := map[string]string{"username": "User name", "name": "Name", "password": "Password", "role": "Role",
			"kinds": "Interrupt kinds", "email": "Email", "slack_id": "Slack user id", "url": "URL", "events": "Events"}[inv.Field]
		if label == "" {
			label = inv.Field
		}
		return response.Sentence(label + ": " + inv.Message), true
	case errors.Is(err, auth.ErrExists) && strings.Contains(err.Error(), "slack id"):
		return "That Slack user id belongs to another user.", true
	case errors.Is(err, auth.ErrExists):
		return "A user of that name exists already.", true
	case errors.Is(err, auth.ErrNotFound):
		return "There is no such user or token (any more).", true
	}
	return "", false
}

// --- users ---

// usersPage: GET /admin/users.
func (d *desk) usersPage(c echo.Context) error {
	return d.writeUsers(c, http.StatusOK, views.UsersPage{Message: d.s.takeFlash(c)})
}

func (d *desk) writeUsers(c echo.Context, status int, page views.UsersPage) error {
	ctx := c.Request().Context()
	users, err := d.s.auth.Users(ctx)
	if err != nil {
		return err
	}
	me := request.Principal(c)
	page.Page = d.pageMeta(ctx, "Users", "users")
	page.Roles = roleNames()
	if page.NewRole == "" {
		page.NewRole = string(auth.RoleViewer)
	}
	for _, u := range users {
		page.Users = append(page.Users, views.UserRow{Name: u.Username, Role: string(u.Role), Kinds: strings.Join(u.Kinds, ","),
			Disabled: u.Disabled, Created: u.CreatedAt, Self: me.Kind == auth.KindUser && me.Name == u.Username,
			Email: u.Email, SlackID: u.SlackID, Issuer: u.OIDCIssuer, Subject: u.OIDCSubject,
			Groups: groupsLine(u.IdPGroups), LastLogin: u.LastLoginAt})
	}
	return response.Page(c, status, views.UsersView(page))
}

// addUserForm: POST /admin/users — username, role, kinds, password.
func (d *desk) addUserForm(c echo.Context) error {
	ctx := c.Request().Context()
	name, roleRaw, kindsRaw, email := c.FormValue("username"), c.FormValue("role"), c.FormValue("kinds"), c.FormValue("email")
	status := http.StatusUnprocessableEntity
	refuse := func(msg string) error {
		return d.writeUsers(c, status, views.UsersPage{Error: msg, NewName: name, NewRole: roleRaw,
			NewKinds: kindsRaw, NewEmail: email})
	}
	if msg := unstorable(c); msg != "" {
		status = http.StatusBadRequest
		name, roleRaw, kindsRaw, email = pgtext.Shown(name), pgtext.Shown(roleRaw), pgtext.Shown(kindsRaw), pgtext.Shown(email)
		return refuse(msg)
	}
	role, err := auth.ParseRole(roleRaw)
	if err != nil {
		return refuse(response.Sentence(err.Error()))
	}
	kinds, err := auth.ParseKinds(kindsRaw)
	if err != nil {
		msg, _ := adminMessage(err)
		return refuse(msg)
	}
	u, err := d.s.auth.AddUserWithEmail(ctx, request.Principal(c).Name, name, c.FormValue("password"), role, kinds, email)
	if msg, ok := adminMessage(err); ok {
		return refuse(msg)
	}
	if err != nil {
		return err
	}
	d.s.setFlash(c, "User "+u.Username+" added.")
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

// userForm: POST /admin/users/:name — op=role (role, kinds), disable,
// enable.
func (d *desk) userForm(c echo.Context) error {
	ctx := c.Request().Context()
	name := strings.ToLower(strings.TrimSpace(c.Param("name")))
	me := request.Principal(c)
	var done string
	var err error
	if msg := unstorable(c); msg != "" {
		return d.writeUsers(c, http.StatusBadRequest, views.UsersPage{Error: msg})
	}
	switch op := c.FormValue("op"); op {
	case "role":
		role, rerr := auth.ParseRole(c.FormValue("role"))
		if rerr != nil {
			return d.writeUsers(c, http.StatusUnprocessableEntity, views.UsersPage{Error: response.Sentence(rerr.Error())})
		}
		kinds, kerr := auth.ParseKinds(c.FormValue("kinds"))
		if kerr != nil {
			msg, _ := adminMessage(kerr)
			return d.writeUsers(c, http.StatusUnprocessableEntity, views.UsersPage{Error: msg})
		}
		if me.Kind == auth.KindUser && me.Name == name && role != auth.RoleAdmin {
			return d.writeUsers(c, http.StatusUnprocessableEntity,
				views.UsersPage{Error: "You cannot take the admin role from yourself; ask another admin."})
		}
		err = d.s.auth.SetRole(ctx, me.Name, name, role, kinds)
		done = fmt.Sprintf("%s is now %s.", name, response.Article(string(role)))
	case "disable", "enable":
		if me.Kind == auth.KindUser && me.Name == name {
			return d.writeUsers(c, http.StatusUnprocessableEntity, views.UsersPage{Error: "You cannot disable yourself."})
		}
		if op == "disable" {
			err = d.s.auth.DisableUser(ctx, me.Name, name)
			done = name + " is disabled; their sessions have ended."
		} else {
			err = d.s.auth.EnableUser(ctx, me.Name, name)
			done = name + " is enabled."
		}
	case "contact":
		// Both checked before either is written: a bad one changes nothing.
		if _, err = auth.NormalizeEmail(c.FormValue("email")); err == nil {
			err = auth.CheckSlackID(c.FormValue("slack_id"))
		}
		if err == nil {
			err = d.s.auth.SetEmail(ctx, me.Name, name, c.FormValue("email"))
		}
		if err == nil {
			err = d.s.auth.SetSlack(ctx, me.Name, name, c.FormValue("slack_id"))
		}
		done = "Saved where " + name + " is notified."
	case "passwd":
		// An admin resets another's password (their sessions end); their
		// own they change on /account, which asks for the current one.
		if me.Kind == auth.KindUser && me.Name == name {
			return d.writeUsers(c, http.StatusUnprocessableEntity,
				views.UsersPage{Error: "Change your own password on your account page (click your name at the top)."})
		}
		err = d.s.auth.SetPassword(ctx, me.Name, name, c.FormValue("password"))
		done = name + "'s password is reset; their sessions have ended. Tell them the new one."
	default:
		return response.BadRequest("op", "op must be role, disable, enable, contact or passwd")
	}
	if msg, ok := adminMessage(err); ok {
		return d.writeUsers(c, http.StatusUnprocessableEntity, views.UsersPage{Error: msg})
	}
	if err != nil {
		return err
	}
	d.s.setFlash(c, done)
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

// --- tokens ---

// tokensPage: GET /admin/tokens.
func (d *desk) tokensPage(c echo.Context) error {
	page := views.TokensPage{Message: d.s.takeFlash(c)}
	if secret := d.s.takeCookie(c, revealCookie, revealPath); secret != "" {
		// The one view of a token just created: name and secret.
		if name, sec, ok := strings.Cut(secret, "\n"); ok {
			page.SecretName, page.Secret = name, sec
		}
	}
	return d.writeTokens(c, http.StatusOK, page)
}

func (d *desk) writeTokens(c echo.Context, status int, page views.TokensPage) error {
	ctx := c.Request().Context()
	toks, err := d.s.auth.Tokens(ctx)
	if err != nil {
		return err
	}
	page.Page = d.pageMeta(ctx, "API tokens", "tokens")
	page.BaseURL = d.s.baseURL(c)
	page.Roles = roleNames()
	for _, t := range toks {
		page.Tokens = append(page.Tokens, views.TokenRow{ID: t.ID, Name: t.Name, Role: string(t.Role), CreatedBy: t.CreatedBy,
			Created: t.CreatedAt, LastUsed: t.LastUsedAt, Revoked: t.RevokedAt})
	}
	return response.Page(c, status, views.TokensView(page))
}

// createTokenForm: POST /admin/tokens — name, role; then a redirect to
// the tokens page, which shows the token this once (a reload of that page
// creates nothing and shows it no more). Names of active tokens are
// unique: two "ci-bot" tokens could not be told apart when revoking one.
func (d *desk) createTokenForm(c echo.Context) error {
	if msg := unstorable(c); msg != "" {
		return d.writeTokens(c, http.StatusBadRequest, views.TokensPage{Error: msg})
	}
	role, err := auth.ParseRole(c.FormValue("role"))
	if err != nil {
		return d.writeTokens(c, http.StatusUnprocessableEntity, views.TokensPage{Error: response.Sentence(err.Error())})
	}
	name := strings.TrimSpace(c.FormValue("name"))
	toks, err := d.s.auth.Tokens(c.Request().Context())
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t.RevokedAt == nil && strings.EqualFold(t.Name, name) {
			return d.writeTokens(c, http.StatusUnprocessableEntity, views.TokensPage{
				Error: "An active token is named " + t.Name + " already. Pick another name, or revoke that one first."})
		}
	}
	secret, t, err := d.s.auth.CreateToken(c.Request().Context(), request.Principal(c).Name, name, role)
	if msg, ok := adminMessage(err); ok {
		return d.writeTokens(c, http.StatusUnprocessableEntity, views.TokensPage{Error: msg})
	}
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: revealCookie, Value: url.QueryEscape(t.Name + "\n" + secret), Path: revealPath,
		MaxAge: 60, HttpOnly: true, Secure: d.s.secure(c.Request()), SameSite: http.SameSiteStrictMode})
	return c.Redirect(http.StatusSeeOther, revealPath)
}

// revokeTokenForm: POST /admin/tokens/:id/revoke.
func (d *desk) revokeTokenForm(c echo.Context) error {
	t, err := d.s.auth.RevokeToken(c.Request().Context(), request.Principal(c).Name, c.Param("id"))
	if msg, ok := adminMessage(err); ok {
		return d.writeTokens(c, http.StatusNotFound, views.TokensPage{Error: msg})
	}
	if err != nil {
		return err
	}
	d.s.setFlash(c, "Token "+t.Name+" is revoked.")
	return c.Redirect(http.StatusSeeOther, "/admin/tokens")
}

// --- audit ---

// auditPage: GET /audit?actor=&kind=&since=&until= — the audit trail,
// newest first, a page at a time.
func (d *desk) auditPage(c echo.Context) error {
	ctx := c.Request().Context()
	page := views.AuditPage{Actor: c.QueryParam("actor"), Kind: c.QueryParam("kind"), Since: c.QueryParam("since"),
		Until: c.QueryParam("until")}
	page.Page = d.pageMeta(ctx, "Audit trail", "audit")
	f, err := request.AuditFilter(c)
	if err != nil {
		page.Error = response.Sentence(response.Of(err).Message)
		return response.Page(c, http.StatusBadRequest, views.AuditView(page))
	}
	evs, err := d.s.auth.AuditTrail(ctx, f)
	if err != nil {
		return err
	}
	titles := map[string]string{}
	for i := range evs {
		r := auditRow(&evs[i])
		if id := evs[i].TaskID; id != "" {
			// One read per task on the page, not per event.
			if _, ok := titles[id]; !ok {
				titles[id] = ""
				if t, err := d.s.store.Task(ctx, id); err == nil {
					titles[id] = t.Title
				}
			}
			if titles[id] != "" {
				r.SubjectLabel = titles[id]
			}
		}
		page.Events = append(page.Events, r)
	}
	if n := len(evs); n > 0 && n == f.Limit {
		q := c.QueryParams()
		q.Set("until", evs[n-1].At.UTC().Format(time.RFC3339Nano))
		page.MoreURL = "/audit?" + q.Encode()
	}
	return response.Page(c, http.StatusOK, views.AuditView(page))
}

// auditRow shapes an event: its kind in words, its subject linked (a
// task's page, the Users or Tokens page), its data as labelled fields.
func auditRow(e *auth.AuditEvent) views.AuditRow {
	r := views.AuditRow{At: e.At, Actor: e.Actor, Kind: e.Kind, Subject: e.Subject, What: auditWhat(e.Kind),
		SubjectLabel: e.Subject}
	if e.TaskID != "" {
		r.TaskURL = "/tasks/" + e.TaskID
		r.SubjectURL, r.SubjectLabel = r.TaskURL, "task "+shortID(e.TaskID)
	}
	switch {
	case strings.HasPrefix(e.Kind, "user.") || e.Kind == auth.AuditLoginFailed:
		r.SubjectURL = "/admin/users"
	case strings.HasPrefix(e.Kind, "token."):
		r.SubjectURL = "/admin/tokens"
	}
	if !strings.Contains(e.Actor, ":") && e.Actor != "bootstrap" && e.Actor != "system" && e.Actor != "retention" &&
		e.Kind != auth.AuditLoginFailed {
		r.ActorURL = "/admin/users"
	}
	var data map[string]any
	if json.Unmarshal(e.Data, &data) == nil {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			v := data[k]
			if s, ok := v.(string); ok {
				if s == "" {
					continue
				}
				parts = append(parts, k+"="+graph.Excerpt(s, 120))
				r.Fields = append(r.Fields, views.AuditField{Label: humanize(k), Value: graph.Excerpt(s, 300)})
				continue
			}
			b, _ := json.Marshal(v)
			parts = append(parts, k+"="+graph.Excerpt(string(b), 120))
			r.Fields = append(r.Fields, views.AuditField{Label: humanize(k), Value: graph.Excerpt(string(b), 300)})
		}
		r.Details = strings.Join(parts, "  ")
	}
	return r
}

// auditWhat is an audit kind in words: "decision.recorded" → "Decision
// recorded", "user.password_set" → "User password set".
func auditWhat(kind string) string {
	return humanize(strings.NewReplacer(".", " ", "_", " ").Replace(kind))
}

// shortID is the first block of a uuid, as the desk shows ids.
func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}
