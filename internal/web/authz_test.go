package web

// Who may do what, over real HTTP against a whole replica: the role ×
// endpoint matrix of every route, CSRF, websocket origins, separation of
// duties and several approvers, sign-in and sign-out, the headers.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/mcp"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"github.com/gatehousehq/gatehouse/static"
)

// send is one HTTP request; header values are set as given.
func send(t *testing.T, method, rawURL string, body io.Reader, header map[string]string, cookies ...*http.Cookie) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// matrixCred is one way of calling: nobody, or a principal of a role (an
// API token for /api/v1, a signed-in user for the desk).
type matrixCred struct {
	role  auth.Role // "" nobody
	token string
	sess  testSession
}

// TestRoleEndpointMatrix walks every route of the router with every role:
// nobody gets 401 (the desk's pages send them to the login page), a role
// below the route's least role gets 403, the others get through (2xx or
// 3xx where the request is a valid one, and never 401/403/5xx). A route
// without a declared role fails the test.
func TestRoleEndpointMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ctx := context.Background()
	roles := e.srv.RouteRoles()

	creds := []matrixCred{{}}
	for _, r := range auth.Roles {
		secret, _, err := e.auth.CreateToken(ctx, "test", "m-"+string(r), r)
		if err != nil {
			t.Fatal(err)
		}
		name := "m-" + string(r)
		e.user(name, r)
		creds = append(creds, matrixCred{role: r, token: secret, sess: e.session(name)})
	}
	// A task waiting at its PRD, for the routes that read one.
	readID := e.createFeature("Matrix reads")
	readItr := e.waitPending(readID, "prd").ID
	e.user("target", auth.RoleViewer)

	var seq atomic.Int64
	uniq := func(p string) string { return fmt.Sprintf("%s%d", p, seq.Add(1)) }
	// freshWaiting is a task of its own at its PRD gate, for a decision.
	freshWaiting := func() (string, string) {
		id := e.createFeature(uniq("Matrix decide "))
		return id, e.waitPending(id, "prd").ID
	}

	// request builds the request of a route for a caller allowed to make
	// it: a valid one where the route changes something, and the statuses
	// it should then get.
	type built struct {
		path   string
		body   string
		ctype  string
		expect []int
	}
	build := func(method, route string) built {
		path := strings.NewReplacer(":id", readID, ":step", "1", ":name", "target").Replace(route)
		ok := []int{http.StatusOK}
		isAPI := strings.HasPrefix(route, api.Prefix)
		form := func(v url.Values, expect ...int) built {
			return built{path: path, body: v.Encode(), ctype: "application/x-www-form-urlencoded", expect: expect}
		}
		switch method + " " + route {
		case "GET /api/v1/tasks/:id/stream", "GET /tasks/:id/live", "GET /live/dashboard", "GET /live/inbox":
			return built{path: path, expect: []int{http.StatusBadRequest}} // a websocket, asked without an upgrade
		case "GET " + static.Prefix + "*":
			return built{path: static.Prefix + "nothing.css", expect: []int{http.StatusNotFound}}
		case "POST /api/v1/tasks":
			b, _ := json.Marshal(featureTask(map[string]bool{}))
			return built{path: path, body: string(b), ctype: "application/json", expect: []int{http.StatusCreated}}
		case "POST /api/v1/tasks/:id/decisions":
			id, itr := freshWaiting()
			return built{path: api.Prefix + "/tasks/" + id + "/decisions", body: `{"interrupt_id":"` + itr + `","action":"approve"}`,
				ctype: "application/json", expect: []int{http.StatusAccepted}}
		case "POST /api/v1/requests":
			return built{path: path, body: `{"kind":"matrix","title":"` + uniq("Matrix request ") + `"}`, ctype: "application/json",
				expect: []int{http.StatusCreated}}
		case "GET /api/v1/requests/:id", "POST /api/v1/requests/:id/cancel":
			// The task read is no request; the role check passed.
			return built{path: path, body: "", ctype: "application/json", expect: []int{http.StatusNotFound}}
		case "GET /api/v1/interrupts/:id":
			return built{path: api.Prefix + "/interrupts/" + readItr, expect: ok}
		case "POST /api/v1/interrupts/:id/claim", "DELETE /api/v1/interrupts/:id/claim":
			_, itr := freshWaiting()
			return built{path: api.Prefix + "/interrupts/" + itr + "/claim", expect: ok}
		case "POST /tasks/:id/claim":
			id, itr := freshWaiting()
			b := form(url.Values{"interrupt_id": {itr}, "op": {"claim"}}, http.StatusSeeOther)
			b.path = "/tasks/" + id + "/claim"
			return b
		case "POST /api/v1/tasks/:id/cancel":
			id := e.createFeature(uniq("Matrix cancel "))
			return built{path: api.Prefix + "/tasks/" + id + "/cancel", expect: []int{http.StatusAccepted}}
		case "POST /api/v1/tasks/:id/retry", "POST /tasks/:id/retry":
			// Only a failed task retries: a waiting one is a conflict, once
			// the caller may retry at all.
			return built{path: path, body: "", ctype: "application/x-www-form-urlencoded", expect: []int{http.StatusConflict}}
		case "POST /tasks/:id/fork":
			return form(url.Values{"step": {"0"}}, http.StatusSeeOther)
		case "POST /api/v1/tasks/:id/fork":
			return built{path: path, body: `{"step":0}`, ctype: "application/json", expect: []int{http.StatusCreated}}
		case "GET /login":
			return built{path: path, expect: []int{http.StatusOK, http.StatusSeeOther}} // signed in: on to the desk
		case "POST /login":
			// Public; without the login form's cookie it asks to try again.
			return form(url.Values{"username": {"x"}, "password": {"y"}}, http.StatusForbidden)
		case "POST /logout":
			return form(url.Values{}, http.StatusSeeOther)
		case "POST /tasks/new":
			return form(url.Values{"workflow": {"feature"}, "input.description": {featuretest.DefaultDescription}}, http.StatusSeeOther)
		case "POST /tasks/:id/decide":
			id, itr := freshWaiting()
			b := form(url.Values{"interrupt_id": {itr}, "action": {"approve"}}, http.StatusSeeOther)
			b.path = "/tasks/" + id + "/decide"
			return b
		case "POST /tasks/:id/cancel":
			id := e.createFeature(uniq("Matrix cancel "))
			b := form(url.Values{}, http.StatusSeeOther)
			b.path = "/tasks/" + id + "/cancel"
			return b
		case "POST /admin/users":
			return form(url.Values{"username": {uniq("newbie")}, "role": {"viewer"}, "password": {"long enough"}}, http.StatusSeeOther)
		case "POST /admin/users/:name":
			return form(url.Values{"op": {"role"}, "role": {"operator"}}, http.StatusSeeOther)
		case "POST /admin/tokens":
			return form(url.Values{"name": {uniq("tok")}, "role": {"viewer"}}, http.StatusSeeOther)
		case "POST /account/password":
			// A wrong current password: refused, nothing changed.
			return form(url.Values{"current": {"not it"}, "password": {"a new password"}, "repeat": {"a new password"}},
				http.StatusUnprocessableEntity)
		case "GET /act/:token", "HEAD /act/:token":
			// Public: the token is the credential; an unknown one is 404.
			return built{path: "/act/" + strings.Repeat("A", 43), expect: []int{http.StatusNotFound}}
		case "POST /act/:token":
			b := form(url.Values{"action": {"approve"}}, http.StatusNotFound)
			b.path = "/act/" + strings.Repeat("A", 43)
			return b
		case "POST /admin/webhooks":
			// Refused (a loopback URL without GATEHOUSE_WEBHOOK_ALLOW_PRIVATE):
			// the role check passed, nothing is stored.
			return form(url.Values{"url": {"http://127.0.0.1:9/hook"}}, http.StatusBadRequest)
		case "POST /admin/webhooks/:id/remove", "POST /admin/webhooks/deliveries/:id/redeliver":
			b := form(url.Values{}, http.StatusNotFound)
			b.path = strings.Replace(route, ":id", "00000000-0000-0000-0000-000000000000", 1)
			return b
		case "POST /integrations/slack/actions":
			// Public: Slack signs it; unsigned is 401 (404 unconfigured).
			return built{path: path, body: "payload=%7B%7D", ctype: "application/x-www-form-urlencoded",
				expect: []int{http.StatusUnauthorized, http.StatusNotFound}}
		case "POST /admin/tokens/:id/revoke":
			_, tok, err := e.auth.CreateToken(ctx, "test", uniq("revokee"), auth.RoleViewer)
			if err != nil {
				t.Fatal(err)
			}
			b := form(url.Values{}, http.StatusSeeOther)
			b.path = "/admin/tokens/" + tok.ID + "/revoke"
			return b
		}
		if method == http.MethodPost {
			t.Fatalf("route %s %s: the matrix has no valid request for it; add one", method, route)
		}
		if isAPI {
			return built{path: path, expect: ok}
		}
		return built{path: path, expect: ok}
	}

	routes := e.srv.Echo().Routes()
	sort.Slice(routes, func(i, j int) bool { return routes[i].Method+routes[i].Path < routes[j].Method+routes[j].Path })
	checked := 0
	for _, rt := range routes {
		if rt.Method == "echo_route_not_found" || rt.Method == "" {
			continue
		}
		if langgraph.Owns(rt.Path) {
			// The LangGraph API authenticates by x-api-key and checks roles
			// itself (internal/langgraph's tests).
			continue
		}
		if rt.Path == mcp.Path {
			// MCP authenticates by bearer token and each tool checks its
			// role (internal/mcp's tests).
			continue
		}
		key := rt.Method + " " + rt.Path
		need, declared := roles[key]
		if !declared {
			t.Errorf("route %s declares no role", key)
			continue
		}
		isAPI := strings.HasPrefix(rt.Path, api.Prefix)
		for _, c := range creds {
			var b built
			allowed := need == "" || c.role != "" && c.role.Allows(need)
			if allowed {
				b = build(rt.Method, rt.Path)
			} else {
				b = built{path: strings.NewReplacer(":id", readID, ":step", "1", ":name", "target").Replace(rt.Path), body: "{}",
					ctype: "application/json"}
				if strings.HasSuffix(b.path, "*") {
					b.path = strings.TrimSuffix(b.path, "*") + "x"
				}
			}
			header := map[string]string{}
			if b.ctype != "" {
				header["Content-Type"] = b.ctype
			}
			var cookies []*http.Cookie
			body := b.body
			switch {
			case c.role == "":
			case isAPI:
				header["Authorization"] = "Bearer " + c.token
			default:
				sess := c.sess
				if key == "POST /logout" {
					sess = e.freshSession(c.sess.name) // logging out ends it
				}
				cookies = append(cookies, sess.cookie)
				if rt.Method == http.MethodPost {
					v, _ := url.ParseQuery(body)
					if b.ctype != "application/x-www-form-urlencoded" {
						v = url.Values{}
					}
					v.Set(csrfField, sess.csrf)
					body, header["Content-Type"] = v.Encode(), "application/x-www-form-urlencoded"
				}
			}
			var rd io.Reader
			if rt.Method == http.MethodPost {
				rd = strings.NewReader(body)
			}
			status, h, resp := send(t, rt.Method, e.base+b.path, rd, header, cookies...)
			who := string(c.role)
			if who == "" {
				who = "nobody"
			}
			switch {
			case !allowed && c.role == "":
				want := http.StatusUnauthorized
				if !isAPI && rt.Method == http.MethodGet {
					// (A websocket handshake is 401: TestWebsocketAuth.)
					want = http.StatusSeeOther
					if loc := h.Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
						t.Errorf("%s as nobody: redirected to %q, want the login page", key, loc)
					}
				}
				if status != want {
					t.Errorf("%s as nobody: %d, want %d", key, status, want)
				}
			case !allowed:
				if status != http.StatusForbidden {
					t.Errorf("%s as %s: %d, want 403: %.200s", key, who, status, resp)
				} else if !strings.Contains(resp, "needs the "+string(need)+" role") {
					t.Errorf("%s as %s: 403 without the reason: %.200s", key, who, resp)
				}
			default:
				if !containsInt(b.expect, status) {
					t.Errorf("%s as %s (%s): %d, want %v: %.300s", key, who, b.path, status, b.expect, resp)
				}
			}
			checked++
		}
	}
	if checked < 5*30 {
		t.Errorf("only %d route × role checks", checked)
	}
	t.Logf("%d route × role checks over %d routes", checked, len(roles))
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// freshSession is another session of name (not cached).
func (e *bundle) freshSession(name string) testSession {
	e.t.Helper()
	l, err := e.auth.Login(context.Background(), name, password(name), "127.0.0.1", "go test")
	if err != nil {
		e.t.Fatalf("sign %s in: %v", name, err)
	}
	return testSession{name: name, cookie: &http.Cookie{Name: sessionCookie, Value: l.Secret}, csrf: auth.CSRFToken(l.Session.CSRFKey)}
}

// deskFingerprint sums up what a refused request must not change.
func (e *bundle) deskFingerprint(t *testing.T) string {
	t.Helper()
	var s string
	err := e.pool.QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT count(*) FROM tasks), (SELECT count(*) FROM decisions), (SELECT count(*) FROM approvals),
		(SELECT count(*) FROM task_events), (SELECT count(*) FROM users), (SELECT count(*) FROM api_tokens),
		(SELECT md5(coalesce(string_agg(t.id::text || t.status || c.event_seq, ',' ORDER BY t.id), '')) FROM tasks t LEFT JOIN workflow_checkpoints c ON c.task_id = t.id),
		(SELECT md5(coalesce(string_agg(username || role || disabled, ',' ORDER BY username), '')) FROM users))`).Scan(&s)
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	return s
}

// otherFirst is token with another first character: wrong for sure.
func otherFirst(token string) string {
	if strings.HasPrefix(token, "x") {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}

// TestCSRF: a desk post with its session but without the session's CSRF
// token, or with another's, is 403 and changes nothing; with it, it works.
// An API post with a session cookie needs the X-CSRF-Token header.
func TestCSRF(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("CSRF")
	itr := e.waitPending(id, "prd")
	ann, bob := e.session("ann"), e.session("bob")
	before := e.deskFingerprint(t)
	forms := []struct {
		path string
		form url.Values
	}{
		{"/tasks/" + id + "/decide", url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}}},
		{"/tasks/" + id + "/cancel", url.Values{}},
		{"/tasks/new", url.Values{"workflow": {"feature"}, "input.description": {"x"}}},
		{"/admin/users", url.Values{"username": {"eve"}, "role": {"admin"}, "password": {"long enough"}}},
		{"/admin/tokens", url.Values{"name": {"eve"}, "role": {"admin"}}},
		{"/admin/users/bob", url.Values{"op": {"disable"}}},
		{"/logout", url.Values{}},
	}
	for _, f := range forms {
		for _, c := range []struct {
			name string
			o    postOpts
		}{{"missing", postOpts{csrf: "-"}}, {"wrong", postOpts{csrf: otherFirst(ann.csrf)}}, {"another session's", postOpts{csrf: bob.csrf}},
			{"missing (htmx)", postOpts{csrf: "-", hx: true}}} {
			status, _, body := e.postAs(t, &ann, f.path, f.form, c.o)
			if status != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("POST %s with %s token: %d, want 403 naming CSRF", f.path, c.name, status)
			}
		}
	}
	if after := e.deskFingerprint(t); after != before {
		t.Fatalf("refused posts changed something:\n%s\n%s", before, after)
	}
	// The session still works (logout was refused), and the token too.
	if status, _, _ := e.getAs(t, &ann, "/", nil); status != http.StatusOK {
		t.Fatalf("session after refused logout: %d", status)
	}
	// htmx sends the token as a header.
	status, _, body := e.postAs(t, &ann, "/tasks/"+id+"/decide", url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}},
		postOpts{csrf: "-", hx: true, origin: ""})
	if status != http.StatusForbidden {
		t.Fatalf("htmx decision without a token: %d", status)
	}
	req, _ := http.NewRequest(http.MethodPost, e.base+"/tasks/"+id+"/decide",
		strings.NewReader(url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	req.Header.Set(csrfHeader, ann.csrf)
	req.AddCookie(ann.cookie)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "approved") {
		t.Fatalf("htmx decision with the header: %d %s", res.StatusCode, b)
	}
	_ = body

	// The API with the session cookie: reads need no token, posts do.
	task2 := e.createFeature("CSRF API")
	// Both tasks at rest (the runner moves them), so that the fingerprint
	// sees only what the requests do.
	e.waitPending(task2, "prd")
	e.waitPending(id, "plan")
	if status, _, _ := send(t, "GET", e.base+"/api/v1/tasks/"+task2, nil, nil, ann.cookie); status != http.StatusOK {
		t.Fatalf("API read with a session: %d", status)
	}
	before = e.deskFingerprint(t)
	if status, _, body := send(t, "POST", e.base+"/api/v1/tasks/"+task2+"/cancel", nil, nil, ann.cookie); status != http.StatusForbidden ||
		!strings.Contains(body, "CSRF") {
		t.Fatalf("API post with a session and no token: %d %s", status, body)
	}
	if after := e.deskFingerprint(t); after != before {
		t.Fatal("a refused API post changed something")
	}
	if status, _, body := send(t, "POST", e.base+"/api/v1/tasks/"+task2+"/cancel", nil, map[string]string{csrfHeader: ann.csrf},
		ann.cookie); status != http.StatusAccepted {
		t.Fatalf("API post with a session and its token: %d %s", status, body)
	}
}

// TestWebsocketAuth: the live feeds and the event stream refuse a handshake
// from another origin and one without credentials; the same origin with a
// session (or a bearer token) connects.
func TestWebsocketAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Sockets")
	e.waitPending(id, "prd")
	ann := e.session("ann")
	ws := "ws" + strings.TrimPrefix(e.base, "http")
	cookie := ann.cookie.Name + "=" + ann.cookie.Value
	cases := []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"desk feed, same origin", "/tasks/" + id + "/live", http.Header{"Cookie": {cookie}, "Origin": {e.base}}, http.StatusSwitchingProtocols},
		{"desk feed, other origin", "/tasks/" + id + "/live", http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"desk feed, no session", "/tasks/" + id + "/live", http.Header{"Origin": {e.base}}, http.StatusUnauthorized},
		{"dashboard feed, other origin", "/live/dashboard", http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"inbox feed, same origin", "/live/inbox", http.Header{"Cookie": {cookie}, "Origin": {e.base}}, http.StatusSwitchingProtocols},
		{"API stream, session, same origin", "/api/v1/tasks/" + id + "/stream", http.Header{"Cookie": {cookie}, "Origin": {e.base}}, http.StatusSwitchingProtocols},
		{"API stream, session, other origin", "/api/v1/tasks/" + id + "/stream", http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"API stream, bearer", "/api/v1/tasks/" + id + "/stream", http.Header{"Authorization": {"Bearer " + testToken}}, http.StatusSwitchingProtocols},
		{"API stream, nothing", "/api/v1/tasks/" + id + "/stream", http.Header{"Origin": {e.base}}, http.StatusUnauthorized},
	}
	for _, c := range cases {
		conn, res, err := websocket.DefaultDialer.Dial(ws+c.path, c.header)
		if conn != nil {
			conn.Close()
		}
		got := 0
		if res != nil {
			got = res.StatusCode
		}
		if got != c.want {
			t.Errorf("%s: handshake %d (%v), want %d", c.name, got, err, c.want)
		}
	}
}

// TestSeparationOfDutiesHTTP: the creator of a task approving its own
// merge gets 403 with the reason, over the API and from the desk's form,
// and nothing is recorded; another approver's approval goes through.
func TestSeparationOfDutiesHTTP(t *testing.T) {
	t.Parallel()
	policy := auth.DefaultPolicy()
	b := setup(t, setupOpts{token: testToken, policy: &policy})
	ctx := context.Background()
	alice, _, err := b.srv.auth.CreateToken(ctx, "test", "alice", auth.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := b.srv.auth.CreateToken(ctx, "test", "bob", auth.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	r := b.doAuth(t, http.MethodPost, "/api/v1/tasks", featureTask(map[string]bool{"allowPrd": true, "allowPlan": true}), "Bearer "+alice)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var task api.Task
	r.json(t, &task)
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting || out.Interrupt.Kind != "merge" {
		t.Fatalf("run to merge: %+v", out)
	}
	merge := b.getTask(t, task.ID).PendingInterrupt
	before := b.fingerprint(t)
	r = b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", map[string]any{"interrupt_id": merge.ID, "action": "approve"},
		"Bearer "+alice)
	if r.status != http.StatusForbidden {
		t.Fatalf("creator approving own merge: %d %s", r.status, r.body)
	}
	if e := r.apiErr(t); e.Code != response.CodeForbidden ||
		!strings.Contains(e.Message, "Separation of duties: token:alice started this task and may not approve its own merge") {
		t.Fatalf("refusal: %+v", e)
	}
	if after := b.fingerprint(t); after != before {
		t.Fatal("the refused approval changed something")
	}
	var refused int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE kind = 'decision.refused' AND actor = 'token:alice'`).Scan(&refused); err != nil || refused != 1 {
		t.Fatalf("refusal in the audit trail: %d %v", refused, err)
	}
	r = b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", map[string]any{"interrupt_id": merge.ID, "action": "approve"},
		"Bearer "+bob)
	if r.status != http.StatusAccepted {
		t.Fatalf("another approver: %d %s", r.status, r.body)
	}
	ds, _ := b.store.Decisions(ctx, task.ID)
	if len(ds) != 1 || ds[0].DecidedBy != "token:bob" {
		t.Fatalf("decisions: %+v", ds)
	}
}

// TestSeparationOfDutiesDesk: the same from the desk: the creator's page
// offers no approve button and says why; a forged approve is 403 with the
// reason and changes nothing; rejecting is open to the creator.
func TestSeparationOfDutiesDesk(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("carol", auth.RoleApprover)
	carol := e.session("carol")
	task, err := e.engine.Create(context.Background(), graph.NewTask{Workflow: "feature", Title: "Carol's change",
		Input:   json.RawMessage(`{"description":"` + featuretest.DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":{"allowPrd":true,"allowPlan":true}}`), CreatedBy: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.Wake()
	merge := e.waitPending(task.ID, "merge")
	_, _, page := e.getAs(t, &carol, "/tasks/"+task.ID, nil)
	if strings.Contains(page, `value="approve"`) || !strings.Contains(page, "You started this task") ||
		!strings.Contains(page, `value="reject"`) {
		t.Fatal("the creator's page offers to approve its own merge, or offers nothing")
	}
	before := e.deskFingerprint(t)
	status, _, body := e.postAs(t, &carol, "/tasks/"+task.ID+"/decide", url.Values{"interrupt_id": {merge.ID}, "action": {"approve"}},
		postOpts{hx: true})
	if status != http.StatusForbidden || !strings.Contains(body, "Separation of duties: carol started this task") {
		t.Fatalf("forged approval by the creator: %d %s", status, body)
	}
	if after := e.deskFingerprint(t); after != before {
		t.Fatal("the refused approval changed a row")
	}
	// Another approver sees the approve button and approves.
	_, _, page = e.get(t, "/tasks/"+task.ID, nil)
	if !strings.Contains(page, `value="approve"`) {
		t.Fatal("another approver is not offered to approve")
	}
	if status, _, body := e.postForm(t, "/tasks/"+task.ID+"/decide", url.Values{"interrupt_id": {merge.ID}, "action": {"approve"}},
		true, ""); status != http.StatusOK || !strings.Contains(body, "approved") {
		t.Fatalf("another approver: %d %s", status, body)
	}
}

// TestTwoApprovers: with merge=2, the first approval leaves the task
// waiting and the answer says "1 of 2 approvals"; the same approver again
// is refused; a second approver's approval records the decision and the
// task resumes. Over the API, and on the desk's page.
func TestTwoApprovers(t *testing.T) {
	t.Parallel()
	policy := auth.NewPolicy(map[string]int{"merge": 2}, []string{"merge"})
	b := setup(t, setupOpts{token: testToken, policy: &policy})
	ctx := context.Background()
	tokens := b.approverTokens(t, "ann", "bob")
	task := b.create(t, featureTask(map[string]bool{"allowPrd": true, "allowPlan": true}))
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting || out.Interrupt.Kind != "merge" {
		t.Fatalf("run to merge: %+v", out)
	}
	merge := b.getTask(t, task.ID).PendingInterrupt
	if merge.Approvals == nil || merge.Approvals.Progress != "0 of 2 approvals" {
		t.Fatalf("pending merge before any approval: %+v", merge.Approvals)
	}
	approve := map[string]any{"interrupt_id": merge.ID, "action": "approve"}
	r := b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", approve, tokens["ann"])
	if r.status != http.StatusAccepted {
		t.Fatalf("first approval: %d %s", r.status, r.body)
	}
	var got api.Task
	r.json(t, &got)
	if got.Status != "waiting" || got.PendingInterrupt == nil || got.PendingInterrupt.ID != merge.ID ||
		got.PendingInterrupt.Approvals.Progress != "1 of 2 approvals" || strings.Join(got.PendingInterrupt.Approvals.Approvers, ",") != "token:ann" {
		t.Fatalf("after one approval: %s", r.body)
	}
	if n := b.wakes.Load(); n != 1 { // the create only: a pending approval wakes nobody
		t.Errorf("wakes after one approval: %d", n)
	}
	before := b.fingerprint(t)
	r = b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", approve, tokens["ann"])
	if r.status != http.StatusForbidden || !strings.Contains(r.apiErr(t).Message, "token:ann has already approved this merge (1 of 2 approvals)") {
		t.Fatalf("same approver twice: %d %s", r.status, r.body)
	}
	if after := b.fingerprint(t); after != before {
		t.Fatal("the refused second approval changed something")
	}
	r = b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", approve, tokens["bob"])
	if r.status != http.StatusAccepted {
		t.Fatalf("second approval: %d %s", r.status, r.body)
	}
	r.json(t, &got)
	if got.Status != "queued" || got.PendingInterrupt != nil {
		t.Fatalf("after two approvals: %s", r.body)
	}
	if out := b.run(t, task.ID); out.Status != graph.StatusSucceeded {
		t.Fatalf("resumed: %+v", out)
	}
	ds, _ := b.store.Decisions(ctx, task.ID)
	if len(ds) != 1 || ds[0].DecidedBy != "token:bob" || ds[0].Action != "approve" {
		t.Fatalf("decisions: %+v", ds)
	}
	evs, _ := b.store.Events(ctx, task.ID, 0, 1000)
	var kinds []string
	var last struct {
		Approvers []string `json:"approvers"`
	}
	for _, ev := range evs {
		if ev.Type == graph.EventApprovalRecorded || ev.Type == graph.EventDecisionRecorded {
			kinds = append(kinds, ev.Type)
			_ = json.Unmarshal(ev.Data, &last)
		}
	}
	if strings.Join(kinds, " ") != "approval.recorded approval.recorded decision.recorded" ||
		strings.Join(last.Approvers, ",") != "token:ann,token:bob" {
		t.Fatalf("events: %q, approvers %v", kinds, last.Approvers)
	}
}

// TestTwoApproversDesk: the desk's page says "1 of 2 approvals" and keeps
// the form open for the next approver, not for the one who approved.
func TestTwoApproversDesk(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.stopServer()
	e.policy = auth.NewPolicy(map[string]int{"merge": 2}, []string{"merge"})
	e.startServer()
	e.user("ann", auth.RoleApprover)
	e.user("bob", auth.RoleApprover, "merge")
	ann, bob := e.session("ann"), e.session("bob")
	task, err := e.engine.Create(context.Background(), graph.NewTask{Workflow: "feature", Title: "Two approvers",
		Input:   json.RawMessage(`{"description":"` + featuretest.DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":{"allowPrd":true,"allowPlan":true}}`), CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.Wake()
	merge := e.waitPending(task.ID, "merge")
	path := "/tasks/" + task.ID + "/decide"
	approve := url.Values{"interrupt_id": {merge.ID}, "action": {"approve"}}
	// Both follow the page live: each socket gets the decision area as its
	// own principal may use it.
	var seq int64
	if err := e.pool.QueryRow(context.Background(), `SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1`, task.ID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	live := func(s testSession) *websocket.Conn {
		u := fmt.Sprintf("ws%s/tasks/%s/live?after=%d&ik=p:%s", strings.TrimPrefix(e.base, "http"), task.ID, seq, merge.ID)
		c, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Cookie": {s.cookie.Name + "=" + s.cookie.Value}, "Origin": {e.base}})
		if err != nil {
			t.Fatalf("live socket of %s: %v", s.name, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	annLive, bobLive := live(ann), live(bob)
	// area reads a socket until a decision area with progress arrives.
	area := func(c *websocket.Conn, progress string) string {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				t.Fatalf("live area with %q: %v", progress, err)
			}
			if i := strings.Index(string(msg), `id="interrupt"`); i >= 0 && strings.Contains(string(msg), progress) {
				return string(msg[i:])
			}
		}
	}
	status, _, body := e.postAs(t, &ann, path, approve, postOpts{hx: true})
	if status != http.StatusOK || !strings.Contains(body, "1 of 2 approvals: ann") || strings.Contains(body, `value="approve"`) ||
		!strings.Contains(body, "You have approved this") {
		t.Fatalf("first approval: %d %s", status, body)
	}
	if a := area(annLive, "1 of 2 approvals: ann"); strings.Contains(a, `value="approve"`) || !strings.Contains(a, "You have approved this") {
		t.Errorf("ann's live area offers a second approval: %s", a)
	}
	if a := area(bobLive, "1 of 2 approvals: ann"); !strings.Contains(a, `value="approve"`) || strings.Contains(a, "_csrf") {
		t.Errorf("bob's live area does not offer the second approval (or carries a token): %s", a)
	}
	status, _, body = e.postAs(t, &ann, path, approve, postOpts{hx: true})
	if status != http.StatusForbidden || !strings.Contains(body, "ann has already approved this merge (1 of 2 approvals)") {
		t.Fatalf("again: %d %s", status, body)
	}
	_, _, page := e.getAs(t, &bob, "/tasks/"+task.ID, nil)
	if !strings.Contains(page, "1 of 2 approvals: ann") || !strings.Contains(page, `value="approve"`) {
		t.Fatal("bob's page does not offer the second approval")
	}
	status, _, body = e.postAs(t, &bob, path, approve, postOpts{hx: true})
	if status != http.StatusOK || !strings.Contains(body, "approved") {
		t.Fatalf("second approval: %d %s", status, body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		tk, _ := e.store.Task(context.Background(), task.ID)
		if tk.Status == graph.StatusSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s after two approvals", tk.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLoginAndLogout: the login page signs in (cookie HttpOnly, SameSite
// Lax; Secure with the __Host- prefix behind a trusted TLS proxy), goes on
// to a local next only, refuses a wrong password and throttles guessing;
// logging out ends the session on the server.
func TestLoginAndLogout(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("lena", auth.RoleViewer)

	// The form with its own token.
	status, h, page := e.getAs(t, nil, "/login?next=%2Finbox", nil)
	if status != http.StatusOK || !strings.Contains(page, `name="username"`) || !strings.Contains(page, `name="password"`) ||
		!strings.Contains(page, `name="next" value="/inbox"`) {
		t.Fatalf("login page: %d", status)
	}
	loginCk := cookieNamed(h, loginCookie)
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if loginCk == nil || m == nil || loginCk.Value != m[1] || loginCk.SameSite != http.SameSiteStrictMode || !loginCk.HttpOnly {
		t.Fatalf("login token: cookie %+v, field %v", loginCk, m)
	}
	post := func(form url.Values, header map[string]string) (int, http.Header, string) {
		t.Helper()
		form.Set(csrfField, loginCk.Value)
		if header == nil {
			header = map[string]string{}
		}
		header["Content-Type"] = "application/x-www-form-urlencoded"
		return send(t, http.MethodPost, e.base+"/login", strings.NewReader(form.Encode()), header, loginCk)
	}
	status, h, _ = post(url.Values{"username": {"Lena"}, "password": {password("lena")}, "next": {"/inbox"}}, nil)
	sessCk := cookieNamed(h, sessionCookie)
	if status != http.StatusSeeOther || h.Get("Location") != "/inbox" || sessCk == nil || !sessCk.HttpOnly ||
		sessCk.SameSite != http.SameSiteLaxMode || sessCk.Secure || sessCk.MaxAge <= 0 || sessCk.Path != "/" {
		t.Fatalf("sign in: %d %v %+v", status, h.Get("Location"), sessCk)
	}
	if status, _, body := e.getAs(t, &testSession{cookie: sessCk}, "/inbox", nil); status != http.StatusOK || !strings.Contains(body, `data-user="lena"`) {
		t.Fatalf("signed-in page: %d", status)
	}
	// A signed-in visitor of /login goes on.
	if status, h, _ := e.getAs(t, &testSession{cookie: sessCk}, "/login?next=/inbox", nil); status != http.StatusSeeOther || h.Get("Location") != "/inbox" {
		t.Fatalf("login page when signed in: %d %s", status, h.Get("Location"))
	}
	// next never leaves the site.
	for _, next := range []string{"https://evil.example/", "//evil.example", "/\\evil.example", "javascript:alert(1)"} {
		status, h, _ := post(url.Values{"username": {"lena"}, "password": {password("lena")}, "next": {next}}, nil)
		if status != http.StatusSeeOther || h.Get("Location") != "/" {
			t.Errorf("next=%q: %d %s", next, status, h.Get("Location"))
		}
	}
	// Without the form's token: refused.
	status, _, _ = send(t, http.MethodPost, e.base+"/login", strings.NewReader(url.Values{"username": {"lena"},
		"password": {password("lena")}}.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if status != http.StatusForbidden {
		t.Fatalf("login without the form's token: %d", status)
	}
	// Behind a TLS-terminating proxy that says so: Secure, __Host-.
	// (Without GATEHOUSE_TRUST_PROXY the header means nothing.)
	status, h, _ = post(url.Values{"username": {"lena"}, "password": {password("lena")}}, map[string]string{"X-Forwarded-Proto": "https"})
	if ck := cookieNamed(h, sessionCookie); status != http.StatusSeeOther || ck == nil || ck.Secure {
		t.Fatalf("sign in with an untrusted X-Forwarded-Proto: %d %+v", status, h.Values("Set-Cookie"))
	}
	e.stopServer()
	e.trustProxy = true
	e.startServer()
	status, h, _ = post(url.Values{"username": {"lena"}, "password": {password("lena")}}, map[string]string{"X-Forwarded-Proto": "https"})
	if ck := cookieNamed(h, secureSessionCookie); status != http.StatusSeeOther || ck == nil || !ck.Secure || !ck.HttpOnly {
		t.Fatalf("sign in over TLS: %d %+v", status, h.Values("Set-Cookie"))
	}
	e.stopServer()
	e.trustProxy = false
	e.startServer()

	// Wrong password: 401 and the form again, kept name.
	status, _, body := post(url.Values{"username": {"lena"}, "password": {"nope-nope"}}, nil)
	if status != http.StatusUnauthorized || !strings.Contains(body, "Wrong user name or password") || !strings.Contains(body, `value="lena"`) {
		t.Fatalf("wrong password: %d", status)
	}
	// Throttled after five failures in a row.
	for i := 0; i < 4; i++ {
		post(url.Values{"username": {"lena"}, "password": {"nope-nope"}}, nil)
	}
	status, h, body = post(url.Values{"username": {"lena"}, "password": {password("lena")}}, nil)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(body, "Too many failed attempts") {
		t.Fatalf("throttled login: %d %v", status, h.Get("Retry-After"))
	}

	// Logout ends the session on the server: the old cookie is worthless.
	sess := testSession{cookie: sessCk}
	_, _, page = e.getAs(t, &sess, "/", nil)
	csrf := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no csrf meta on the page")
	}
	sess.csrf = csrf[1]
	status, h, _ = e.postAs(t, &sess, "/logout", url.Values{}, postOpts{})
	if status != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Fatalf("logout: %d %s", status, h.Get("Location"))
	}
	if ck := cookieNamed(h, sessionCookie); ck == nil || ck.MaxAge >= 0 {
		t.Errorf("logout does not clear the cookie: %v", h.Values("Set-Cookie"))
	}
	if status, h, _ := e.getAs(t, &sess, "/", nil); status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Fatalf("the old cookie after logout: %d", status)
	}
	if status, _, _ := send(t, "GET", e.base+"/api/v1/tasks", nil, nil, sessCk); status != http.StatusUnauthorized {
		t.Fatalf("the old cookie on the API after logout: %d", status)
	}
	// htmx requests without a session are told where to sign in.
	status, h, _ = e.getAs(t, nil, "/inbox", map[string]string{"HX-Request": "true", "HX-Current-URL": e.base + "/tasks/x?a=1"})
	if status != http.StatusUnauthorized || h.Get("HX-Redirect") != "/login?next=%2Ftasks%2Fx%3Fa%3D1" {
		t.Fatalf("htmx without a session: %d %q", status, h.Get("HX-Redirect"))
	}
}

func cookieNamed(h http.Header, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestSecurityHeaders: every kind of response carries them: pages, API,
// errors, static files, the login page, probes.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann")
	_, _, home := e.getAs(t, &ann, "/", nil)
	css := regexp.MustCompile(`href="(/static/app\.[0-9a-f]{12}\.css)"`).FindStringSubmatch(home)
	for _, c := range []struct {
		path string
		sess *testSession
		hdr  map[string]string
	}{
		{"/", &ann, nil}, {"/login", nil, nil}, {"/", nil, nil}, {"/healthz", nil, nil}, {"/tasks/nope", &ann, nil},
		{"/api/v1/tasks", nil, map[string]string{"Authorization": "Bearer " + testToken}}, {"/api/v1/tasks", nil, nil},
		{css[1], nil, nil},
	} {
		_, h, _ := e.getAs(t, c.sess, c.path, c.hdr)
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			strings.Contains(csp, "unsafe-inline") || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("Referrer-Policy") != "same-origin" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", c.path, h)
		}
	}
	// Bodies are bounded everywhere: the API (1 MiB), forms (256 KiB).
	big := strings.Repeat("x", maxFormBody+1)
	status, _, _ := e.postAs(t, &ann, "/tasks/nope/cancel", url.Values{"pad": {big}}, postOpts{})
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a form over the limit: %d", status)
	}
	status, _, _ = send(t, http.MethodPost, e.base+"/login", strings.NewReader("a="+big),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a login form over the limit: %d", status)
	}
	status, _, _ = send(t, http.MethodPost, e.base+"/api/v1/tasks", bytes.NewReader(make([]byte, response.MaxBody+1)),
		map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"})
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("an API body over the limit: %d", status)
	}
}

// TestAuditTrail: decisions, cancels, user and token changes are in the
// audit trail with their actors, filterable over the API and on the page.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann")
	id := e.createFeature("Audited")
	itr := e.waitPending(id, "prd")
	if status, _, _ := e.postAs(t, &ann, "/tasks/"+id+"/decide", url.Values{"interrupt_id": {itr.ID}, "action": {"reject"},
		"feedback": {"more detail"}}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("reject: %d", status)
	}
	if status, _, _ := e.postAs(t, &ann, "/tasks/"+id+"/cancel", nil, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("cancel: %d", status)
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/users", url.Values{"username": {"vic"}, "role": {"viewer"},
		"password": {password("vic")}}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("add user: %d", status)
	}
	status, h, _ := e.postAs(t, &ann, "/admin/tokens", url.Values{"name": {"ci"}, "role": {"operator"}}, postOpts{})
	_, _, body := e.follow(t, &ann, h)
	secret := regexp.MustCompile(`id="token-secret">(gatehouse_[A-Za-z0-9_-]+)<`).FindStringSubmatch(body)
	if status != http.StatusSeeOther || secret == nil {
		t.Fatalf("create token: %d", status)
	}
	// The token works, with its role, and its name as the actor.
	if status, _, _ := send(t, "GET", e.base+"/api/v1/tasks", nil, map[string]string{"Authorization": "Bearer " + secret[1]}); status != http.StatusOK {
		t.Fatalf("the new token: %d", status)
	}
	if status, _, _ := send(t, "GET", e.base+"/api/v1/audit", nil, map[string]string{"Authorization": "Bearer " + secret[1]}); status != http.StatusForbidden {
		t.Fatalf("an operator token reads the audit trail: %d", status)
	}
	// The page shows the token once: the list never does.
	if _, _, list := e.getAs(t, &ann, "/admin/tokens", nil); strings.Contains(list, secret[1]) {
		t.Fatal("the token list shows a secret")
	}

	var out struct {
		Events []api.AuditEvent `json:"events"`
	}
	get := func(q string) []api.AuditEvent {
		t.Helper()
		status, _, body := send(t, "GET", e.base+"/api/v1/audit?"+q, nil, map[string]string{"Authorization": "Bearer " + testToken})
		if status != http.StatusOK {
			t.Fatalf("audit %s: %d %s", q, status, body)
		}
		out.Events = nil
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out.Events
	}
	kinds := func(evs []api.AuditEvent) string {
		var k []string
		for _, e := range evs {
			k = append(k, e.Actor+":"+e.Kind)
		}
		return strings.Join(k, " ")
	}
	if got := kinds(get("actor=ann")); got != "ann:token.created ann:user.created ann:task.cancelled ann:decision.recorded ann:session.created" {
		t.Errorf("ann's trail: %s", got)
	}
	if got := kinds(get("kind=decision")); got != "ann:decision.recorded" {
		t.Errorf("decisions: %s", got)
	}
	evs := get("kind=task.cancelled")
	if len(evs) != 1 || evs[0].TaskID != id || evs[0].Subject != id {
		t.Errorf("cancel event: %+v", evs)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := get("since=" + url.QueryEscape(future)); len(got) != 0 {
		t.Errorf("events from the future: %d", len(got))
	}
	if got := get("until=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))); len(got) != 0 {
		t.Errorf("events from an hour ago: %d", len(got))
	}
	if status, _, _ := send(t, "GET", e.base+"/api/v1/audit?since=yesterday", nil, map[string]string{"Authorization": "Bearer " + testToken}); status != http.StatusBadRequest {
		t.Errorf("bad since: %d", status)
	}
	// The page.
	status, _, page := e.getAs(t, &ann, "/audit?actor=ann&kind=decision", nil)
	if status != http.StatusOK || !strings.Contains(page, `data-kind="decision.recorded"`) || strings.Contains(page, `data-kind="user.created"`) ||
		!strings.Contains(page, `href="/tasks/`+id+`"`) || !strings.Contains(page, "<dt>Feedback</dt><dd>more detail</dd>") ||
		!strings.Contains(page, ">Audited</a>") || !strings.Contains(page, "Decision recorded") {
		t.Fatalf("audit page: %d", status)
	}
	vic := e.session("vic")
	if status, _, _ := e.getAs(t, &vic, "/audit", nil); status != http.StatusForbidden {
		t.Fatalf("a viewer's audit page: %d", status)
	}
}

// TestAdminPages: users are added, changed and disabled (which ends their
// sessions) from the page; an admin cannot lock itself out.
func TestAdminPages(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann")
	e.user("vic", auth.RoleViewer)
	vic := e.session("vic")
	if status, _, page := e.getAs(t, &ann, "/admin/users", nil); status != http.StatusOK || !strings.Contains(page, `data-user="vic"`) {
		t.Fatalf("users page: %d", status)
	}
	status, _, body := e.postAs(t, &ann, "/admin/users", url.Values{"username": {"Bad Name"}, "role": {"viewer"},
		"password": {"long enough"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "User name: use up to 63") || !strings.Contains(body, `value="Bad Name"`) {
		t.Fatalf("bad name: %d", status)
	}
	status, _, body = e.postAs(t, &ann, "/admin/users", url.Values{"username": {"pat"}, "role": {"viewer"}, "kinds": {"merge"},
		"password": {"long enough"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "only an approver") {
		t.Fatalf("kinds for a viewer: %d", status)
	}
	status, h, _ := e.postAs(t, &ann, "/admin/users/vic", url.Values{"op": {"role"}, "role": {"approver"}, "kinds": {"merge"}}, postOpts{})
	if _, _, page := e.follow(t, &ann, h); status != http.StatusSeeOther || h.Get("Location") != "/admin/users" ||
		!strings.Contains(page, "vic is now an approver.") {
		t.Fatalf("role change: %d %s", status, h.Get("Location"))
	}
	if status, _, page := e.getAs(t, &vic, "/", nil); status != http.StatusOK || !strings.Contains(page, `data-role="approver"`) {
		t.Fatalf("vic after the role change: %d", status)
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/users/vic", url.Values{"op": {"disable"}}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("disable: %d", status)
	}
	if status, _, _ := e.getAs(t, &vic, "/", nil); status != http.StatusSeeOther {
		t.Fatalf("a disabled user's session: %d", status)
	}
	for _, f := range []url.Values{{"op": {"disable"}}, {"op": {"role"}, "role": {"viewer"}}} {
		if status, _, body := e.postAs(t, &ann, "/admin/users/ann", f, postOpts{}); status != http.StatusUnprocessableEntity ||
			!strings.Contains(body, "yourself") {
			t.Errorf("an admin locking itself out (%v): %d", f, status)
		}
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/users/nobody", url.Values{"op": {"enable"}}, postOpts{}); status != http.StatusUnprocessableEntity {
		t.Errorf("enable a missing user: %d", status)
	}
}

// TestWebsocketEndsWithCredentials: an open stream ends (close 1008) once
// the token it was opened with is revoked, or the session logged out.
func TestWebsocketEndsWithCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, tweak: func(s *Server) { s.sockets.PingPeriod = 50 * time.Millisecond }})
	ctx := context.Background()
	task := b.create(t, featureTask(nil))
	secret, tok, err := b.srv.auth.CreateToken(ctx, "test", "watcher", auth.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.srv.auth.AddUser(ctx, "test", "wendy", "wendy-password", auth.RoleViewer, nil); err != nil {
		t.Fatal(err)
	}
	l, err := b.srv.auth.Login(ctx, "wendy", "wendy-password", "127.0.0.1", "go test")
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws" + strings.TrimPrefix(b.base, "http") + "/api/v1/tasks/" + task.ID + "/stream"
	for _, c := range []struct {
		name   string
		header http.Header
		end    func()
	}{
		{"revoked token", http.Header{"Authorization": {"Bearer " + secret}}, func() {
			if _, err := b.srv.auth.RevokeToken(ctx, "test", tok.ID); err != nil {
				t.Fatal(err)
			}
		}},
		{"logged out", http.Header{"Cookie": {sessionCookie + "=" + l.Secret}, "Origin": {b.base}}, func() {
			if err := b.srv.auth.Logout(ctx, l.Session.ID, "wendy"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		conn, _, err := websocket.DefaultDialer.Dial(ws, c.header)
		if err != nil {
			t.Fatalf("%s: dial: %v", c.name, err)
		}
		c.end()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, _, err := conn.ReadMessage()
			if err == nil {
				continue
			}
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
				t.Fatalf("%s: socket ended with %v, want close 1008", c.name, err)
			}
			break
		}
		conn.Close()
	}
}

// approverTokens makes an approver API token for each name: name →
// "Bearer <secret>".
func (b *bundle) approverTokens(t *testing.T, names ...string) map[string]string {
	t.Helper()
	tokens := map[string]string{}
	for _, n := range names {
		secret, _, err := b.srv.auth.CreateToken(context.Background(), "test", n, auth.RoleApprover)
		if err != nil {
			t.Fatal(err)
		}
		tokens[n] = "Bearer " + secret
	}
	return tokens
}
