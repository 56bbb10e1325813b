package desk

// Sign-in with the company's identity provider (SPEC §21): thin handlers
// over package sso (the protocol) and auth (users and sessions).

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/views"
)

// oidcCookie binds a sign-in's state to the browser that began it: only
// that browser can finish it (no login CSRF, no code injection from a
// link). SameSite=Lax: the provider's redirect back is a top-level GET.
const oidcCookie = "gatehouse_oidc"

// The routes exist only when single sign-on is configured.

// ssoStart: POST /auth/oidc/start — begins a sign-in with the identity
// provider and sends the browser there. While the provider cannot be
// reached, the login page says so (503).
func (d *desk) ssoStart(c echo.Context) error {
	next := localPath(c.FormValue("next"))
	authURL, state, err := d.s.sso.Begin(c.Request().Context(), next)
	if errors.Is(err, sso.ErrUnavailable) {
		return d.writeLogin(c, http.StatusServiceUnavailable, views.LoginPage{Next: next})
	}
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: oidcCookie, Value: state, Path: "/auth/oidc/", MaxAge: int(sso.FlowTTL.Seconds()),
		HttpOnly: true, Secure: d.s.secure(c.Request()), SameSite: http.SameSiteLaxMode})
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, authURL)
}

// ssoCallback: GET /auth/oidc/callback — the provider sends the browser
// back here. A verified identity with a mapped group gets a session and
// goes on; anything else is refused (4xx, audited, no session) on the
// sign-in page, saying why as far as it is safe to.
func (d *desk) ssoCallback(c echo.Context) error {
	r := c.Request()
	c.Response().Header().Set("Cache-Control", "no-store")
	browserState := ""
	if ck, err := c.Cookie(oidcCookie); err == nil {
		browserState = ck.Value
	}
	c.SetCookie(&http.Cookie{Name: oidcCookie, Value: "", Path: "/auth/oidc/", MaxAge: -1, HttpOnly: true,
		Secure: d.s.secure(r), SameSite: http.SameSiteLaxMode})
	addr := d.s.clientAddr(r)
	id, flow, err := d.s.sso.Callback(r.Context(), c.QueryParams(), browserState)
	var re *sso.RefusedError
	switch {
	case errors.As(err, &re):
		d.s.auth.OIDCRefused(r.Context(), "", addr, re.Reason, oidcLogin(re.Identity))
		if re.Identity != nil {
			// The provider vouched for the person but no group maps:
			// whatever access they had here ends.
			if err := d.s.auth.OIDCUnmapped(r.Context(), oidcLogin(re.Identity)); err != nil {
				return err
			}
		}
		return d.writeLogin(c, re.Status, views.LoginPage{Next: localPath(flow.Next), Error: re.Message})
	case errors.Is(err, sso.ErrUnavailable):
		return d.writeLogin(c, http.StatusServiceUnavailable, views.LoginPage{})
	case err != nil:
		return err
	}
	l, err := d.s.auth.LoginOIDC(r.Context(), oidcLogin(id), addr, r.UserAgent())
	if errors.Is(err, auth.ErrDisabled) {
		return d.writeLogin(c, http.StatusForbidden, views.LoginPage{
			Error: "Your Gatehouse account is disabled. Ask an administrator to enable it."})
	}
	if err != nil {
		return err
	}
	d.s.setSessionCookie(c, l.Secret)
	return c.Redirect(http.StatusSeeOther, localPath(flow.Next))
}

// oidcLogin is what auth needs of a verified identity (zero for nil).
func oidcLogin(id *sso.Identity) auth.OIDCLogin {
	if id == nil {
		return auth.OIDCLogin{}
	}
	return auth.OIDCLogin{Issuer: id.Issuer, Subject: id.Subject, PreferredUsername: id.PreferredUsername,
		Email: id.Email, Groups: id.Groups, Role: id.Role}
}

// groupsLine shows a user's IdP groups ("none" for none).
func groupsLine(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	return strings.Join(groups, ", ")
}
