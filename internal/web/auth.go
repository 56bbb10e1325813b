package web

// Who makes a request (issue 6): bearer tokens (the bootstrap token, API
// tokens) for /api/v1, session cookies for the desk (and, with a CSRF
// header for anything that changes state, for the API). Every route
// declares the least role it needs; the principal travels in the echo
// context; the security headers and body limits apply to every response.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/mcp"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Cookie names. Over HTTPS the session cookie carries the __Host- prefix:
// the browser then refuses it unless Secure, host-only and for path /.
const (
	sessionCookie       = "gatehouse_session"
	secureSessionCookie = "__Host-gatehouse_session"
	loginCookie         = "gatehouse_login"
	csrfHeader          = "X-CSRF-Token"
	csrfField           = "_csrf"
)

// secure reports whether the request reached us over HTTPS (directly, or
// through a trusted proxy that says so).
func (s *Server) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return s.trustProxy && strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
}

// clientAddr is the client's IP address (the first X-Forwarded-For hop
// behind a trusted proxy), for login throttling and the audit trail.
func (s *Server) clientAddr(r *http.Request) string {
	if s.trustProxy {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			if ip := net.ParseIP(strings.TrimSpace(strings.Split(xff, ",")[0])); ip != nil {
				return ip.String()
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sessionSecret is the session cookie's value, if any.
func sessionSecret(r *http.Request) string {
	for _, name := range []string{secureSessionCookie, sessionCookie} {
		if ck, err := r.Cookie(name); err == nil && ck.Value != "" {
			return ck.Value
		}
	}
	return ""
}

// setSessionCookie gives the browser its session: HttpOnly (no script
// reads it), SameSite=Lax (not sent with cross-site posts, sent when
// following a link to the desk), Secure over HTTPS.
func (s *Server) setSessionCookie(c echo.Context, secret string) {
	secure := s.secure(c.Request())
	name := sessionCookie
	if secure {
		name = secureSessionCookie
	}
	c.SetCookie(&http.Cookie{Name: name, Value: secret, Path: "/", MaxAge: int(s.auth.SessionMax().Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
}

// clearSessionCookie removes the session cookie (both names).
func (s *Server) clearSessionCookie(c echo.Context) {
	secure := s.secure(c.Request())
	for _, name := range []string{sessionCookie, secureSessionCookie} {
		if name == secureSessionCookie && !secure {
			continue
		}
		c.SetCookie(&http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure,
			SameSite: http.SameSiteLaxMode})
	}
}

// fromSession authenticates the request's session cookie and remembers
// the principal and the session in c. False: no valid session.
func (s *Server) fromSession(c echo.Context) (bool, error) {
	secret := sessionSecret(c.Request())
	if secret == "" {
		return false, nil
	}
	p, sess, err := s.auth.Session(c.Request().Context(), secret)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	request.SetSession(c, p, sess)
	return true, nil
}

// recheck is how a websocket checks, now and then, that the credentials it
// was opened with still hold (a revoked token, a session logged out,
// expired or of a disabled user ends the socket).
func (s *Server) recheck(c echo.Context) func(ctx context.Context) error {
	r := c.Request()
	if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
		_, token, _ := strings.Cut(h, " ")
		return func(ctx context.Context) error { _, err := s.auth.Bearer(ctx, token); return err }
	}
	secret := sessionSecret(r)
	return func(ctx context.Context) error { return s.auth.Valid(ctx, secret) }
}

// csrfValid reports whether a state-changing request of a session carries
// the session's CSRF token: the X-CSRF-Token header (htmx, scripts) or the
// _csrf form field.
func csrfValid(c echo.Context, sess *auth.Session) bool {
	if sess == nil {
		return false
	}
	token := c.Request().Header.Get(csrfHeader)
	if token == "" {
		token = c.FormValue(csrfField)
	}
	return auth.CheckCSRF(sess.CSRFKey, token)
}

func csrfRefused() *response.Error {
	return &response.Error{Status: http.StatusForbidden, Code: response.CodeForbidden,
		Message: "missing or wrong CSRF token: reload the page and try again"}
}

// authenticate runs before anything else about an /api/v1 request: a
// bearer token (the bootstrap token or an API token), or else a desk
// session cookie, whose state-changing requests must carry its CSRF token.
// Nothing valid: 401.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
			scheme, token, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return unauthorized(c)
			}
			p, err := s.auth.Bearer(r.Context(), token)
			if errors.Is(err, auth.ErrUnauthenticated) {
				return unauthorized(c)
			}
			if err != nil {
				return err
			}
			request.SetPrincipal(c, p)
			return next(c)
		}
		ok, err := s.fromSession(c)
		if err != nil {
			return err
		}
		if !ok {
			return unauthorized(c)
		}
		if !request.SafeMethod(r.Method) && !csrfValid(c, request.Session(c)) {
			return csrfRefused()
		}
		return next(c)
	}
}

func unauthorized(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gatehouse"`)
	return &response.Error{Status: http.StatusUnauthorized, Code: response.CodeUnauthorized,
		Message: "a valid bearer token is required (Authorization: Bearer <token>)"}
}

// forbiddenRole refuses a principal whose role is below min.
func forbiddenRole(p auth.Principal, min auth.Role) *response.Error {
	return &response.Error{Status: http.StatusForbidden, Code: response.CodeForbidden,
		Message: fmt.Sprintf("this needs the %s role; %s is %s", min, p.Name, article(string(p.Role)))}
}

func article(role string) string {
	switch {
	case role == "":
		return "without a role"
	case strings.ContainsRune("aeiou", rune(role[0])):
		return "an " + role
	}
	return "a " + role
}

// need is route middleware: the principal's role must include min. It
// runs after routing, so an unknown route of a principal is 404, and
// before the handler reads anything.
func (s *Server) need(min auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p := request.Principal(c); !p.Can(min) {
				return forbiddenRole(p, min)
			}
			return next(c)
		}
	}
}

// route registers a route with the least role it needs ("" for a public
// one) and remembers it: every route has a declared role, which the tests
// walk.
func (s *Server) route(method, path string, role auth.Role, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	if role != "" {
		m = append([]echo.MiddlewareFunc{s.need(role)}, m...)
	}
	s.e.Add(method, path, h, m...)
	s.roles[method+" "+path] = role
}

// RouteRoles maps every route ("GET /api/v1/tasks") to the least role it
// needs; "" is public.
func (s *Server) RouteRoles() map[string]auth.Role {
	out := make(map[string]auth.Role, len(s.roles))
	for k, v := range s.roles {
		out[k] = v
	}
	return out
}

// securityHeaders go on every response: no sniffing, no framing, no
// referrer to other sites, and a content security policy without inline
// script.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		return next(c)
	}
}

// Body limits outside the API (whose limit is response.MaxBody): the new-task form
// with its uploads, and every other form.
const maxFormBody = 256 << 10

// limitDeskBody bounds the body of every request that is not an API one:
// the new-task form may carry uploads (maxUpload), any other form is small.
func limitDeskBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if p := r.URL.Path; p == api.Prefix || strings.HasPrefix(p, api.Prefix+"/") || langgraph.Owns(p) || p == mcp.Path || r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		limit := int64(maxFormBody)
		if r.URL.Path == "/tasks/new" {
			limit = maxUpload
		}
		if r.ContentLength > limit {
			return &response.Error{Status: http.StatusRequestEntityTooLarge, Code: response.CodeTooLarge,
				Message: fmt.Sprintf("request body is larger than %d bytes", limit)}
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}

// localPath is next if it is a path of this site ("/tasks/…"), else "/":
// a login never redirects elsewhere.
func localPath(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return u.RequestURI()
}
