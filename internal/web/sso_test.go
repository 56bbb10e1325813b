package web

// Sign-in with the identity provider at the desk (SPEC §21), against a
// real OpenID Provider in the test (internal/sso/ssotest).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/sso/ssotest"
)

const (
	ssoClientID     = "gatehouse-desk"
	ssoClientSecret = "desk-client-secret"
	ssoPassword     = "idp-password"
)

// ssoDesk is a desk with single sign-on against its own provider.
type ssoDesk struct {
	*bundle
	idp *ssotest.Provider
}

// newSSODesk starts a desk whose sign-in page offers "Sign in with Test
// IdP"; authCfg, when set, changes the auth service (local login off).
// ready false points the desk at a provider that is down.
func newSSODesk(t *testing.T, authCfg func(*auth.Config), ready bool) *ssoDesk {
	t.Helper()
	e := setup(t, withRunner())
	callback := e.base + sso.CallbackPath
	idp := ssotest.Start(t, ssotest.Options{ClientID: ssoClientID, ClientSecret: ssoClientSecret,
		RedirectURIs: []string{callback}, Later: !ready})
	for _, u := range []ssotest.User{
		{Subject: "sub-olga", Username: "olga", Email: "olga@example.com", Password: ssoPassword, Groups: []string{"staff"}},
		{Subject: "sub-pete", Username: "pete", Password: ssoPassword, Groups: []string{"contractors"}},
	} {
		idp.AddUser(u)
	}
	roles, err := sso.ParseRoleMap("idp-admins=admin,payments-leads=approver,staff=viewer")
	if err != nil {
		t.Fatal(err)
	}
	client := sso.New(sso.Config{Issuer: idp.Issuer, ClientID: ssoClientID, ClientSecret: ssoClientSecret,
		RedirectURL: callback, Name: "Test IdP", RoleMap: roles, Store: e.store, Logger: e.log,
		HTTPClient: &http.Client{Timeout: 2 * time.Second}})
	if ready {
		if err := client.Discover(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := auth.Config{Store: e.store, BootstrapToken: testToken}
	if authCfg != nil {
		authCfg(&cfg)
	}
	e.stopServer()
	e.auth, e.sso = auth.NewService(cfg), client
	e.startServer()
	return &ssoDesk{bundle: e, idp: idp}
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t  *testing.T
	hc *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, rawURL string, form url.Values) (int, http.Header, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, rawURL, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		u, _ := url.Parse(rawURL)
		req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(out)
}

// begin presses "Sign in with …" and returns the provider's URL.
func (d *ssoDesk) begin(b *browser, next string) string {
	b.t.Helper()
	status, h, body := b.do(http.MethodPost, d.base+sso.StartPath, url.Values{"next": {next}})
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), d.idp.Issuer) {
		b.t.Fatalf("start: %d %s %.300s", status, h.Get("Location"), body)
	}
	return h.Get("Location")
}

// signIn goes through the whole sign-in as username and returns the
// callback's answer.
func (d *ssoDesk) signIn(b *browser, username, next string) (int, http.Header, string) {
	b.t.Helper()
	cb, err := d.idp.Login(context.Background(), d.begin(b, next), username, ssoPassword)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(http.MethodGet, cb.String(), nil)
}

func (b *browser) hasSession(base string) bool {
	u, _ := url.Parse(base)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == sessionCookie && c.Value != "" {
			return true
		}
	}
	return false
}

func (d *ssoDesk) audit(t *testing.T, kind string) []auth.AuditEvent {
	t.Helper()
	trail, err := d.auth.AuditTrail(context.Background(), auth.AuditFilter{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return trail
}

func TestSSOSignInAtTheDesk(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, nil, true)
	b := newBrowser(t)
	status, h, body := b.do(http.MethodGet, d.base+"/login?next=/inbox", nil)
	if status != http.StatusOK || !strings.Contains(body, `id="sso-login"`) || !strings.Contains(body, "Sign in with Test IdP") ||
		!strings.Contains(body, `id="password"`) {
		t.Fatalf("login page: %d %.2000s", status, body)
	}
	// The form may lead to this site and to the provider, nowhere else.
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+d.idp.Issuer+";") {
		t.Fatalf("login page CSP: %s", csp)
	}
	status, h, body = d.signIn(b, "olga", "/inbox")
	if status != http.StatusSeeOther || h.Get("Location") != "/inbox" || !b.hasSession(d.base) {
		t.Fatalf("callback: %d %s %.500s", status, h.Get("Location"), body)
	}
	status, _, body = b.do(http.MethodGet, d.base+"/live/session", nil)
	if status != http.StatusOK || !strings.Contains(body, `"user":"olga"`) || !strings.Contains(body, `"role":"viewer"`) {
		t.Fatalf("session: %d %s", status, body)
	}
	// The next sign-in follows the groups: olga is an admin now, and sees
	// her binding on the Users page.
	d.idp.SetGroups("olga", "staff", "idp-admins")
	b2 := newBrowser(t)
	if status, _, _ := d.signIn(b2, "olga", "/"); status != http.StatusSeeOther {
		t.Fatalf("second sign-in: %d", status)
	}
	status, _, body = b2.do(http.MethodGet, d.base+"/admin/users", nil)
	for _, want := range []string{`data-user="olga" data-role="admin"`, d.idp.Issuer, "sub-olga", "idp-admins, staff", "SSO"} {
		if !strings.Contains(body, want) {
			t.Fatalf("users page lacks %q: %d %.3000s", want, status, body)
		}
	}
	// Sessions read the user's role: the first browser's session, opened
	// when olga was a viewer, follows too.
	_, _, body = b.do(http.MethodGet, d.base+"/live/session", nil)
	if !strings.Contains(body, `"role":"admin"`) {
		t.Fatalf("the older session does not follow the user's role: %s", body)
	}
}

func TestSSOUnmappedGroupGetsA403PageAndNoUser(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, nil, true)
	b := newBrowser(t)
	status, _, body := d.signIn(b, "pete", "/")
	if status != http.StatusForbidden || !strings.Contains(body, "none of your groups gives a role in Gatehouse") ||
		!strings.Contains(body, "idp-admins, payments-leads, staff") || b.hasSession(d.base) {
		t.Fatalf("unmapped: %d %.3000s", status, body)
	}
	if _, err := d.store.UserByOIDC(context.Background(), d.idp.Issuer, "sub-pete"); err == nil {
		t.Fatal("a user was created")
	}
	trail := d.audit(t, auth.AuditLoginFailed)
	if len(trail) != 1 || trail[0].Actor != "pete" || !strings.Contains(string(trail[0].Data), "no mapped group (groups: contractors)") {
		t.Fatalf("audit: %+v", trail)
	}
}

func TestSSOTamperedCallbacksGetNoSession(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, nil, true)
	// The callback reaches another browser (a link sent to a victim): its
	// state is not that browser's.
	a, victim := newBrowser(t), newBrowser(t)
	cb, err := d.idp.Login(context.Background(), d.begin(a, "/"), "olga", ssoPassword)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := victim.do(http.MethodGet, cb.String(), nil)
	if status != http.StatusBadRequest || victim.hasSession(d.base) || !strings.Contains(body, "could not be completed") {
		t.Fatalf("other browser: %d %.1000s", status, body)
	}
	// An expired ID token, then a foreign signature, in the right browser.
	for _, tamper := range []ssotest.Tamper{{Expired: true}, {ForeignKey: true}, {Nonce: "stale"}} {
		d.idp.SetTamper(tamper)
		b := newBrowser(t)
		status, _, _ := d.signIn(b, "olga", "/")
		if status != http.StatusUnauthorized || b.hasSession(d.base) {
			t.Fatalf("%+v: %d", tamper, status)
		}
	}
	d.idp.SetTamper(ssotest.Tamper{})
	trail := d.audit(t, auth.AuditLoginFailed)
	if len(trail) != 4 {
		t.Fatalf("audit has %d refusals, want 4: %+v", len(trail), trail)
	}
	for _, e := range trail {
		var data struct{ Method, Reason string }
		if err := json.Unmarshal(e.Data, &data); err != nil || data.Method != "oidc" || data.Reason == "" {
			t.Fatalf("refusal without method and reason: %s", e.Data)
		}
	}
	users, _ := d.auth.Users(context.Background())
	for _, u := range users {
		if u.SSO() {
			t.Fatalf("a refused sign-in created %s", u.Username)
		}
	}
}

func TestSSOUnavailableProviderAtTheLoginPage(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, nil, false)
	b := newBrowser(t)
	status, _, body := b.do(http.MethodGet, d.base+"/login", nil)
	if status != http.StatusOK || !strings.Contains(body, `id="sso-unavailable"`) || strings.Contains(body, `id="sso-login"`) ||
		!strings.Contains(body, `id="password"`) {
		t.Fatalf("login page: %d %.2000s", status, body)
	}
	status, _, body = b.do(http.MethodPost, d.base+sso.StartPath, url.Values{"next": {"/"}})
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "unavailable right now") {
		t.Fatalf("start: %d %.1000s", status, body)
	}
}

func TestLocalLoginOffAtTheDesk(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, func(c *auth.Config) { c.LocalLoginOff, c.BreakGlassUser = true, "keyholder" }, true)
	d.user("keyholder", auth.RoleAdmin)
	d.user("ann", auth.RoleAdmin)
	b := newBrowser(t)
	status, _, body := b.do(http.MethodGet, d.base+"/login", nil)
	if status != http.StatusOK || !strings.Contains(body, `id="sso-login"`) || !strings.Contains(body, `<details id="break-glass"`) {
		t.Fatalf("login page: %d %.2000s", status, body)
	}
	login := func(name string) (int, string) {
		b := newBrowser(t)
		_, _, page := b.do(http.MethodGet, d.base+"/login", nil)
		tok := between(page, `name="_csrf" value="`, `"`)
		status, _, body := b.do(http.MethodPost, d.base+"/login", url.Values{"username": {name}, "password": {password(name)},
			"_csrf": {tok}, "next": {"/"}})
		if status == http.StatusSeeOther != b.hasSession(d.base) {
			t.Fatalf("%s: status %d but session %t", name, status, b.hasSession(d.base))
		}
		return status, body
	}
	if status, body := login("ann"); status != http.StatusForbidden || !strings.Contains(body, "Password sign-in is turned off") {
		t.Fatalf("ann: %d %.1500s", status, body)
	}
	if status, _ := login("keyholder"); status != http.StatusSeeOther {
		t.Fatalf("break-glass: %d", status)
	}
	if trail := d.audit(t, auth.AuditBreakGlass); len(trail) != 1 || trail[0].Actor != "keyholder" {
		t.Fatalf("break-glass audit: %+v", trail)
	}
	// API tokens are unchanged.
	if status, _, _ := d.getAs(t, nil, "/api/v1/tasks", map[string]string{"Authorization": "Bearer " + testToken}); status != http.StatusOK {
		t.Fatalf("bootstrap token: %d", status)
	}
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// TestSSOInABrowser clicks "Sign in with Test IdP", signs in at the
// provider's own page and lands on the desk, signed in.
func TestSSOInABrowser(t *testing.T) {
	t.Parallel()
	d := newSSODesk(t, nil, true)
	d.idp.SetGroups("olga", "payments-leads")
	tab := openTab(t, "sso")
	tab.do(chromedp.Navigate(d.base + "/inbox"))
	tab.waitJS(`document.getElementById("sso-login")`, 10*time.Second)
	tab.screenshot("login")
	tab.click("#sso-login")
	tab.waitJS(`document.getElementById("idp-username")`, 10*time.Second)
	tab.SetValue("#idp-username", "olga")
	tab.SetValue("#idp-password", ssoPassword)
	tab.click("#idp-submit")
	tab.waitJS(`location.pathname === "/inbox" && document.querySelector(".whoami-name[data-user=\"olga\"]")`, 15*time.Second)
}
