package desk

// The desk session's cookie as the desk writes it (the server's
// authentication reads it too: request.SessionSecret), and where a
// sign-in may lead.

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/web/request"
)

// secure reports whether the request reached us over HTTPS.
func (s *env) secure(r *http.Request) bool { return request.Secure(r, s.trustProxy) }

// clientAddr is the client's IP address, for login throttling and the
// audit trail.
func (s *env) clientAddr(r *http.Request) string { return request.ClientAddr(r, s.trustProxy) }

// fromSession authenticates the request's session cookie and remembers
// the principal and the session in c. False: no valid session.
func (s *env) fromSession(c echo.Context) (bool, error) { return request.FromSession(c, s.auth) }

// setSessionCookie gives the browser its session: HttpOnly (no script
// reads it), SameSite=Lax (not sent with cross-site posts, sent when
// following a link to the desk), Secure over HTTPS.
func (s *env) setSessionCookie(c echo.Context, secret string) {
	secure := s.secure(c.Request())
	name := request.SessionCookie
	if secure {
		name = request.SecureSessionCookie
	}
	c.SetCookie(&http.Cookie{Name: name, Value: secret, Path: "/", MaxAge: int(s.auth.SessionMax().Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
}

// clearSessionCookie removes the session cookie (both names).
func (s *env) clearSessionCookie(c echo.Context) {
	secure := s.secure(c.Request())
	for _, name := range []string{request.SessionCookie, request.SecureSessionCookie} {
		if name == request.SecureSessionCookie && !secure {
			continue
		}
		c.SetCookie(&http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure,
			SameSite: http.SameSiteLaxMode})
	}
}

// wakeRunner hands work to this replica's runner (NOTIFY tells others).
func (s *env) wakeRunner() {
	if s.wake != nil {
		s.wake()
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
