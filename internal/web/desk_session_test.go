package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
)

// restartWith restarts the env's server on its address with tweak applied
// to the new Server before it listens, so the tweak races no request.
func restartWith(e *bundle, tweak func(*Server)) {
	e.t.Helper()
	e.stopServer()
	e.startServer(tweak)
}

// TestDeskSessionCheck: GET /live/session, asked as htmx asks, is 200 for
// a session that holds and 401 naming the login page (with the page to
// come back to) for none or an ended one; the websocket handshake of an
// ended session is 401 too.
func TestDeskSessionCheck(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ctx := context.Background()
	e.user("sid", auth.RoleViewer)
	sess := e.session("sid")
	id := e.createFeature("Session check")
	hx := map[string]string{"HX-Request": "true", "HX-Current-URL": e.base + "/tasks/" + id + "?a=1"}
	wantLogin := "/login?" + url.Values{"next": {"/tasks/" + id + "?a=1"}}.Encode()

	status, h, body := e.getAs(t, &sess, "/live/session", hx)
	var who map[string]string
	if status != http.StatusOK || json.Unmarshal([]byte(body), &who) != nil || who["user"] != "sid" || who["role"] != "viewer" {
		t.Fatalf("a session that holds: %d %s", status, body)
	}
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("the answer may be cached: %q", h.Get("Cache-Control"))
	}
	if status, h, _ := e.getAs(t, nil, "/live/session", hx); status != http.StatusUnauthorized || h.Get("HX-Redirect") != wantLogin {
		t.Fatalf("no session: %d %q, want 401 %q", status, h.Get("HX-Redirect"), wantLogin)
	}

	l, err := e.auth.Login(ctx, "sid", password("sid"), "127.0.0.1", "go test")
	if err != nil {
		t.Fatal(err)
	}
	ended := testSession{cookie: &http.Cookie{Name: sessionCookie, Value: l.Secret}}
	if status, _, _ := e.getAs(t, &ended, "/live/session", hx); status != http.StatusOK {
		t.Fatalf("before logout: %d", status)
	}
	if err := e.auth.Logout(ctx, l.Session.ID, "sid"); err != nil {
		t.Fatal(err)
	}
	if status, h, _ := e.getAs(t, &ended, "/live/session", hx); status != http.StatusUnauthorized || h.Get("HX-Redirect") != wantLogin {
		t.Fatalf("ended session: %d %q, want 401 %q", status, h.Get("HX-Redirect"), wantLogin)
	}
	ws := "ws" + strings.TrimPrefix(e.base, "http") + "/tasks/" + id + "/live"
	conn, res, err := websocket.DefaultDialer.Dial(ws, http.Header{"Cookie": {sessionCookie + "=" + l.Secret}, "Origin": {e.base}})
	if err == nil {
		conn.Close()
		t.Fatal("the handshake of an ended session was accepted")
	}
	if res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("handshake of an ended session: %v %v, want 401", res, err)
	}
}

// TestLoginNextStaysLocal: whatever next the login form carries, signing
// in goes to a path of this site.
func TestLoginNextStaysLocal(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("nell", auth.RoleViewer)
	_, h, page := e.getAs(t, nil, "/login", nil)
	loginCk := cookieNamed(h, loginCookie)
	if loginCk == nil || !regexp.MustCompile(`name="_csrf"`).MatchString(page) {
		t.Fatal("no login form token")
	}
	for next, want := range map[string]string{
		"/tasks/abc?artifact=prd": "/tasks/abc?artifact=prd",
		"/inbox":                  "/inbox",
		"":                        "/",
		"tasks/abc":               "/",
		"https://evil.example/":   "/",
		"//evil.example/x":        "/",
		"/\\evil.example":         "/",
		"\\\\evil.example":        "/",
		"/\t/evil.example":        "/",
		"/\n/evil.example":        "/",
		" //evil.example":         "/",
		"javascript:alert(1)":     "/",
		"http:/evil.example":      "/",
	} {
		form := url.Values{"username": {"nell"}, "password": {password("nell")}, "next": {next}, csrfField: {loginCk.Value}}
		status, h, _ := send(t, http.MethodPost, e.base+"/login", strings.NewReader(form.Encode()),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, loginCk)
		if status != http.StatusSeeOther || h.Get("Location") != want {
			t.Errorf("next=%q: %d %q, want %q", next, status, h.Get("Location"), want)
		}
		if status, h, _ := e.getAs(t, nil, "/login?"+url.Values{"next": {next}}.Encode(), nil); status != http.StatusOK {
			t.Errorf("login page with next=%q: %d %s", next, status, h.Get("Location"))
		}
	}
}

// TestDeskSessionEndedGoesToLogin: a task page whose session ends goes to
// the login page within seconds, whether its socket is open when that
// happens (the server closes it, 1008) or down (the reconnect's handshake
// is refused, the page asks /live/session); signing in again comes back
// to the task page, live.
func TestDeskSessionEndedGoesToLogin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// end ends the user's sessions on the server, the page's among
		// them; it returns when the page can notice.
		end func(t *testing.T, e *bundle, b *tab, user string)
	}{
		{"password changed while live", func(t *testing.T, e *bundle, b *tab, user string) {
			if err := e.auth.SetPassword(context.Background(), "test", user, password(user)); err != nil {
				t.Fatal(err)
			}
		}},
		{"disabled while the server was down", func(t *testing.T, e *bundle, b *tab, user string) {
			e.stopServer()
			b.waitJS(`document.getElementById("live-state").dataset.state !== "open"`, 5*time.Second)
			ctx := context.Background()
			if err := e.auth.DisableUser(ctx, "test", user); err != nil {
				t.Fatal(err)
			}
			if err := e.auth.EnableUser(ctx, "test", user); err != nil {
				t.Fatal(err)
			}
			e.startServer()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := setup(t, withRunner())
			// Pings are when an open socket checks its session.
			restartWith(env, func(s *Server) { s.sockets.PingPeriod = 200 * time.Millisecond })
			const user = "sally"
			env.user(user, auth.RoleViewer)
			id := env.createFeature("Session ends")
			env.waitPending(id, "prd")
			b := env.openTab(t, user)
			taskPath := "/tasks/" + id
			b.do(chromedp.Navigate(env.base + taskPath + "?from=test"))
			b.waitJS(`document.querySelector("main[data-task-status]")`, 10*time.Second)
			b.liveOpen()

			c.end(t, env, b, user)
			start := time.Now()
			b.waitJS(`location.pathname === "/login" && document.querySelector("input[name=username]")`, 8*time.Second)
			t.Logf("on the login page %v after the session ended", time.Since(start).Round(time.Millisecond))
			wantSearch := "?" + url.Values{"next": {taskPath + "?from=test"}}.Encode()
			if got := eval[string](b, `location.search`); got != wantSearch {
				t.Fatalf("login page at %q, want %q", got, wantSearch)
			}
			if got := eval[string](b, `document.querySelector("input[name=next]").value`); got != taskPath+"?from=test" {
				t.Fatalf("the login form goes on to %q", got)
			}
			b.screenshot("login-after-session-ended")

			b.do(chromedp.SetValue(chromedp.CSS("input[name=username]"), user),
				chromedp.SetValue(chromedp.CSS("input[name=password]"), password(user)))
			b.click(`form[action="/login"] button[type=submit]`)
			b.waitJS(`location.pathname === `+jsq(taskPath)+` && document.querySelector("main[data-task-status]")`, 10*time.Second)
			if got := eval[string](b, `location.search`); got != "?from=test" {
				t.Errorf("back at %s%s, want the query kept", taskPath, got)
			}
			b.liveOpen()
			b.screenshot("back-on-the-task")
		})
	}
}

// TestDeskInboxCursor: the inbox page reads through the store's keyset:
// a cursor shows what comes after it, with the kind filter kept and a
// link back to the oldest; a cursor the server did not hand out is 400.
func TestDeskInboxCursor(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	sess := e.session(defaultUser)
	first := e.waitPending(e.createFeature("Inbox one"), "prd")
	second := e.waitPending(e.createFeature("Inbox two"), "prd")
	items := regexp.MustCompile(`data-interrupt="([^"]+)"`)
	ids := func(body string) []string {
		var out []string
		for _, m := range items.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	cursor := func(itr *graph.Interrupt) string {
		return base64.RawURLEncoding.EncodeToString([]byte(itr.CreatedAt.UTC().Format(time.RFC3339Nano) + " " + itr.ID))
	}
	oldestFirst := []string{first.ID, second.ID}
	if first.CreatedAt.After(second.CreatedAt) || first.CreatedAt.Equal(second.CreatedAt) && first.ID > second.ID {
		oldestFirst = []string{second.ID, first.ID}
	}
	older := first
	if oldestFirst[0] == second.ID {
		older = second
	}

	for _, c := range []struct {
		path  string
		want  []string
		first bool // a link back to the oldest
	}{
		{"/inbox", oldestFirst, false},
		{"/inbox?kind=prd", oldestFirst, false},
		{"/inbox?kind=plan", nil, false},
		{"/inbox?" + url.Values{"after": {cursor(older)}}.Encode(), oldestFirst[1:], true},
		{"/inbox?" + url.Values{"kind": {"prd"}, "after": {cursor(older)}}.Encode(), oldestFirst[1:], true},
	} {
		status, _, body := e.getAs(t, &sess, c.path, nil)
		if status != http.StatusOK || !slices.Equal(ids(body), c.want) {
			t.Errorf("%s: %d %v, want %v", c.path, status, ids(body), c.want)
		}
		if got := strings.Contains(body, "← Oldest"); got != c.first {
			t.Errorf("%s: link to the oldest %t, want %t", c.path, got, c.first)
		}
	}
	for _, bad := range []string{"nope", base64.RawURLEncoding.EncodeToString([]byte("yesterday " + first.ID)),
		base64.RawURLEncoding.EncodeToString([]byte(first.CreatedAt.Format(time.RFC3339Nano) + " not-an-id"))} {
		if status, _, _ := e.getAs(t, &sess, "/inbox?"+url.Values{"after": {bad}}.Encode(), nil); status != http.StatusBadRequest {
			t.Errorf("after=%s: %d, want 400", bad, status)
		}
	}
}
