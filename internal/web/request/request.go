// Package request reads a request for the handler packages: who makes it
// (the principal and desk session the server's authentication put in the
// echo context) and whether they may read a task, path and query
// parameters, cursors and filters, and JSON bodies (DecodeJSON). It
// imports response for its errors and none of the handler packages, nor
// internal/web.
package request

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// MaxTitle is the longest title, in characters, a request may give a
// task.
const MaxTitle = 200

// Context keys.
const (
	principalKey = "gatehouse.principal"
	sessionKey   = "gatehouse.session"
)

// Principal is who makes the request (zero when nobody authenticated).
func Principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// Session is the request's desk session, if it came with one.
func Session(c echo.Context) *auth.Session {
	s, _ := c.Get(sessionKey).(*auth.Session)
	return s
}

// SetPrincipal records who makes the request (authentication does).
func SetPrincipal(c echo.Context, p auth.Principal) { c.Set(principalKey, p) }

// SetSession records the request's desk session and its principal.
func SetSession(c echo.Context, p auth.Principal, s *auth.Session) {
	c.Set(principalKey, p)
	c.Set(sessionKey, s)
}

// MayRead is the one check of which tasks a principal may see: every read
// of a task (API, stream, desk page, live page) goes through it. A task
// they may not see is not found.
func MayRead(p auth.Principal, t *graph.Task) error {
	if !auth.MaySee(p, t) {
		return response.NotFound("task")
	}
	return nil
}

// SafeMethod reports a method that changes nothing.
func SafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// IsHX reports an htmx request.
func IsHX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// SameOrigin reports whether a request comes from one of our pages: an
// Origin header, when the browser sends one, names this host; otherwise
// Fetch metadata does not say cross-site. (Posts also carry the session's
// CSRF token; websockets have no other defence.)
func SameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && strings.EqualFold(u.Host, r.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") != "cross-site"
}
