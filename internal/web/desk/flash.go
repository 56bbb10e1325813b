package desk

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
)

// A flash is the message a redirect after a form carries to the page it
// lands on ("User ann added."): a cookie read once, not a query string,
// so a reload or a shared link never repeats it and nobody can put words
// on the page through a crafted link.
const (
	flashCookie = "gh_flash"
	// revealCookie carries a token secret just created to the one page
	// view that shows it (POST-redirect-GET): HttpOnly, only for the
	// tokens page, for a minute, deleted when read.
	revealCookie = "gh_reveal"
	revealPath   = "/admin/tokens"
)

// setFlash leaves msg for the next page this browser loads.
func (s *env) setFlash(c echo.Context, msg string) {
	c.SetCookie(&http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/", MaxAge: 60,
		HttpOnly: true, Secure: s.secure(c.Request()), SameSite: http.SameSiteLaxMode})
}

// takeFlash returns the message left by setFlash ("" for none) and
// deletes it.
func (s *env) takeFlash(c echo.Context) string {
	return s.takeCookie(c, flashCookie, "/")
}

func (s *env) takeCookie(c echo.Context, name, path string) string {
	ck, err := c.Cookie(name)
	if err != nil || ck.Value == "" {
		return ""
	}
	c.SetCookie(&http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true,
		Secure: s.secure(c.Request()), SameSite: http.SameSiteLaxMode})
	// Not cached: the message (or secret) is shown this once.
	c.Response().Header().Set("Cache-Control", "no-store")
	v, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return ""
	}
	return v
}

// baseURL is the scheme and host this request reached, for examples shown
// on pages (the curl of a new token).
func (s *env) baseURL(c echo.Context) string {
	scheme := "http"
	if s.secure(c.Request()) {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host
}
