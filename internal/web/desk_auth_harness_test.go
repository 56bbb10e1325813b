package web

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// testSession is a signed-in desk session: its cookie and CSRF token.
type testSession struct {
	name   string
	cookie *http.Cookie
	csrf   string
}

// password is a test user's password.
func password(name string) string { return name + "-password" }

// user makes a user (unless it exists) with password(name).
func (e *bundle) user(name string, role auth.Role, kinds ...string) {
	e.t.Helper()
	_, err := e.auth.AddUser(context.Background(), "test", name, password(name), role, kinds)
	if err != nil && !errors.Is(err, auth.ErrExists) {
		e.t.Fatalf("add user %s: %v", name, err)
	}
}

// session signs name in (making it an admin user when it does not exist)
// and returns the session; one per name and test.
func (e *bundle) session(name string) testSession {
	e.t.Helper()
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	if s, ok := e.sessions[name]; ok {
		return s
	}
	if _, err := e.auth.Store().UserByName(context.Background(), name); errors.Is(err, auth.ErrNotFound) {
		e.user(name, auth.RoleAdmin)
	}
	l, err := e.auth.Login(context.Background(), name, password(name), "127.0.0.1", "go test")
	if err != nil {
		e.t.Fatalf("sign %s in: %v", name, err)
	}
	s := testSession{name: name, cookie: &http.Cookie{Name: sessionCookie, Value: l.Secret},
		csrf: auth.CSRFToken(l.Session.CSRFKey)}
	e.sessions[name] = s
	return s
}

// defaultUser is who the desk tests' get and postForm act as.
const defaultUser = "ann"

// getAs fetches a desk URL as sess (nil: without a session), without
// following redirects.
func (e *bundle) getAs(t *testing.T, sess *testSession, path string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sess != nil {
		req.AddCookie(sess.cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	var r io.Reader = res.Body
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// postOpts shape a form post.
type postOpts struct {
	hx     bool   // as htmx sends it
	origin string // the Origin header
	// csrf is the token sent as _csrf: "" the session's own, "-" none.
	csrf string
}

// postAs posts a form as sess (nil: without a session) would.
func (e *bundle) postAs(t *testing.T, sess *testSession, path string, form url.Values, o postOpts) (int, http.Header, string) {
	t.Helper()
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	switch {
	case o.csrf == "-":
	case o.csrf != "":
		f.Set(csrfField, o.csrf)
	case sess != nil:
		f.Set(csrfField, sess.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+path, strings.NewReader(f.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if sess != nil {
		req.AddCookie(sess.cookie)
	}
	if o.hx {
		req.Header.Set("HX-Request", "true")
	}
	if o.origin != "" {
		req.Header.Set("Origin", o.origin)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// openTab opens a browser tab signed in as name through the login page
// (making name an admin user when it does not exist).
func (e *bundle) openTab(t *testing.T, name string) *tab {
	t.Helper()
	if _, err := e.auth.Store().UserByName(context.Background(), name); errors.Is(err, auth.ErrNotFound) {
		e.user(name, auth.RoleAdmin)
	}
	b := openTab(t, name)
	b.login(e, name)
	return b
}

// login signs the tab in through the login page.
func (b *tab) login(e *bundle, name string) {
	b.T.Helper()
	b.do(chromedp.Navigate(e.base + "/login"))
	b.waitJS(`document.querySelector("input[name=username]")`, 10*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS("input[name=username]"), name),
		chromedp.SetValue(chromedp.CSS("input[name=password]"), password(name)))
	b.click(`form[action="/login"] button[type=submit]`)
	b.waitJS(`location.pathname === "/" && document.querySelector(`+jsq(`.whoami-name[data-user="`+name+`"]`)+`)`, 10*time.Second)
}

// follow loads the page a redirect names, as the browser would: with the
// session and the cookies the redirect set (the flash, a token reveal).
func (e *bundle) follow(t *testing.T, sess *testSession, h http.Header) (int, http.Header, string) {
	t.Helper()
	loc := h.Get("Location")
	if loc == "" {
		t.Fatalf("no redirect to follow")
	}
	var parts []string
	if sess != nil {
		parts = append(parts, sess.cookie.Name+"="+sess.cookie.Value)
	}
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.MaxAge >= 0 && c.Value != "" {
			parts = append(parts, c.Name+"="+c.Value)
		}
	}
	return e.getAs(t, nil, loc, map[string]string{"Cookie": strings.Join(parts, "; ")})
}
