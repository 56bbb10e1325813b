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
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/mcp"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/desk"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// recheck is how a websocket checks, now and then, that the credentials it
// was opened with still hold (a revoked token, a session logged out,
// expired or of a disabled user ends the socket).
func (s *Server) recheck(c echo.Context) func(ctx context.Context) error {
	r := c.Request()
	if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
		_, token, _ := strings.Cut(h, " ")
		return func(ctx context.Context) error { _, err := s.auth.Bearer(ctx, token); return err }
	}
	secret := request.SessionSecret(r)
	return func(ctx context.Context) error { return s.auth.Valid(ctx, secret) }
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
		ok, err := request.FromSession(c, s.auth)
		if err != nil {
			return err
		}
		if !ok {
			return unauthorized(c)
		}
		if !request.SafeMethod(r.Method) && !request.CSRFValid(c, request.Session(c)) {
			return response.CSRFRefused()
		}
		return next(c)
	}
}

func unauthorized(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gatehouse"`)
	return &response.Error{Status: http.StatusUnauthorized, Code: response.CodeUnauthorized,
		Message: "a valid bearer token is required (Authorization: Bearer <token>)"}
}

// need is route middleware: the principal's role must include min. It
// runs after routing, so an unknown route of a principal is 404, and
// before the handler reads anything.
func (s *Server) need(min auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p := request.Principal(c); !p.Can(min) {
				return response.ForbiddenRole(p, min)
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
		h.Set("Content-Security-Policy", response.ContentSecurityPolicy)
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
			limit = desk.MaxUpload
		}
		if r.ContentLength > limit {
			return &response.Error{Status: http.StatusRequestEntityTooLarge, Code: response.CodeTooLarge,
				Message: fmt.Sprintf("request body is larger than %d bytes", limit)}
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}
