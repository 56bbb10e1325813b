package request

// Who a request comes from, as the server's authentication and the desk
// both read it: the desk session's cookie and CSRF token, and the
// client's scheme and address behind a trusted proxy.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// Cookie, header and form names of a desk session. Over HTTPS the session
// cookie carries the __Host- prefix: the browser then refuses it unless
// Secure, host-only and for path /.
const (
	SessionCookie       = "gatehouse_session"
	SecureSessionCookie = "__Host-gatehouse_session"
	CSRFHeader          = "X-CSRF-Token"
	CSRFField           = "_csrf"
)

// Secure reports whether the request reached us over HTTPS (directly, or
// through a trusted proxy that says so).
func Secure(r *http.Request, trustProxy bool) bool {
	if r.TLS != nil {
		return true
	}
	return trustProxy && strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
}

// ClientAddr is the client's IP address (the first X-Forwarded-For hop
// behind a trusted proxy), for login throttling and the audit trail.
func ClientAddr(r *http.Request, trustProxy bool) string {
	if trustProxy {
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

// SessionSecret is the session cookie's value, if any.
func SessionSecret(r *http.Request) string {
	for _, name := range []string{SecureSessionCookie, SessionCookie} {
		if ck, err := r.Cookie(name); err == nil && ck.Value != "" {
			return ck.Value
		}
	}
	return ""
}

// Sessions looks a session up by its secret (auth.Service).
type Sessions interface {
	Session(ctx context.Context, secret string) (auth.Principal, *auth.Session, error)
}

// FromSession authenticates the request's session cookie and remembers
// the principal and the session in c. False: no valid session.
func FromSession(c echo.Context, sessions Sessions) (bool, error) {
	secret := SessionSecret(c.Request())
	if secret == "" {
		return false, nil
	}
	p, sess, err := sessions.Session(c.Request().Context(), secret)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	SetSession(c, p, sess)
	return true, nil
}

// CSRFValid reports whether a state-changing request of a session carries
// the session's CSRF token: the X-CSRF-Token header (htmx, scripts) or the
// _csrf form field.
func CSRFValid(c echo.Context, sess *auth.Session) bool {
	if sess == nil {
		return false
	}
	token := c.Request().Header.Get(CSRFHeader)
	if token == "" {
		token = c.FormValue(CSRFField)
	}
	return auth.CheckCSRF(sess.CSRFKey, token)
}

// LogPath is a request's path as logs show it: an action link's token is
// a credential, never written to a log.
func LogPath(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/act/") {
		return "/act/…"
	}
	return r.URL.Path
}
