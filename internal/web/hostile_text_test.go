package web

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestHostileTextAPI: U+0000 (the JSON escape) or invalid UTF-8 in any
// string of an API body — a task's title, its input, a decision's
// feedback — is 400 naming the field; nothing is created or decided.
// PostgreSQL stores neither: before the check they were 500s.
func TestHostileTextAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	count := func() int {
		var n int
		if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM tasks").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for _, c := range []struct{ name, body, field string }{
		{"NUL in title", `{"workflow":"feature","title":"a\u0000b","input":{"description":"Let users export CSV"}}`, "title"},
		{"NUL in input", `{"workflow":"feature","input":{"description":"Let users \u0000 export CSV"}}`, "input.description"},
		{"invalid UTF-8 in input", "{\"workflow\":\"feature\",\"input\":{\"description\":\"Let users \xff\xfe export\"}}", "input.description"},
		{"NUL in a list", `{"workflow":"feature","input":{"description":"ok","tags":["x","\u0000"]}}`, "input.tags[1]"},
	} {
		r := b.do(t, http.MethodPost, "/api/v1/tasks", c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.name, r.status, r.body)
			continue
		}
		if e := r.apiErr(t); e.Field != c.field || !strings.Contains(e.Message, c.field) {
			t.Errorf("%s: error %+v, want the field %s named", c.name, e, c.field)
		}
	}
	if n := count(); n != before {
		t.Errorf("%d tasks created by refused requests", n-before)
	}
	// A decision's feedback.
	task := b.waitingTask(t)
	fp := b.fingerprint(t)
	r := b.do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions",
		`{"interrupt_id":"`+task.PendingInterrupt.ID+`","action":"reject","feedback":"no\u0000pe"}`)
	if r.status != http.StatusBadRequest || r.apiErr(t).Field != "feedback" {
		t.Errorf("feedback with NUL: %d %s", r.status, r.body)
	}
	if got := b.fingerprint(t); got != fp {
		t.Errorf("a refused decision changed the database: %s → %s", fp, got)
	}
}

// TestHostileTextDesk: a desk form with U+0000 or invalid UTF-8 in a
// field (the new-task form, a decision's feedback, an edited document) is
// 400 naming the field, and changes nothing.
func TestHostileTextDesk(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	count := func(q string, args ...any) int {
		var n int
		if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count("SELECT count(*) FROM tasks")
	for _, c := range []struct{ name, field, value string }{
		{"NUL in title", "title", "CSV\x00export"},
		{"invalid UTF-8 in the description", "input.description", "Let users \xff export"},
	} {
		form := url.Values{"workflow": {"feature"}, "title": {"CSV export"}, "input.description": {"Let users export CSV"}}
		form.Set(c.field, c.value)
		status, _, body := e.postForm(t, "/tasks/new", form, false, "")
		if status != http.StatusBadRequest || !strings.Contains(body, c.field) {
			t.Errorf("%s: %d, want 400 naming %s\n%s", c.name, status, c.field, body)
		}
	}
	if n := count("SELECT count(*) FROM tasks"); n != before {
		t.Errorf("%d tasks created by refused forms", n-before)
	}
	id := e.createFeature("Hostile feedback")
	itr := e.waitPending(id, "prd")
	for _, c := range []struct{ action, field, value string }{
		{"reject", "feedback", "no\x00pe"},
		{"edit", "value", "name: csv-export\ndescription: \xff"}, // an edited document
	} {
		status, _, body := e.postForm(t, "/tasks/"+id+"/decide", url.Values{"interrupt_id": {itr.ID}, "action": {c.action},
			c.field: {c.value}}, true, "")
		if status != http.StatusBadRequest || !strings.Contains(body, c.field+" ") {
			t.Errorf("%s with bad text: %d\n%s", c.field, status, body)
		}
	}
	if n := count("SELECT count(*) FROM decisions WHERE task_id = $1", id); n != 0 {
		t.Errorf("%d decisions recorded by a refused form", n)
	}
}

// TestHostileTextQuery: a query parameter with U+0000 (%00) or invalid
// UTF-8 (%FF) — a filter, a search, an analytics range, a cursor — is 400
// naming the parameter on every API route and desk page (an HTML page
// there), checked once before any handler reads it; nothing changes.
// Before, filters that reached PostgreSQL were 500s.
func TestHostileTextQuery(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Hostile query")
	e.waitPending(id, "prd")
	fp := e.fingerprint(t)
	for _, c := range []struct{ path, param string }{
		{"/api/v1/tasks?workflow=%00", "workflow"},
		{"/api/v1/tasks?workflow=%FF", "workflow"},
		{"/api/v1/tasks?status=waiting&cursor=%FF%FE", "cursor"},
		{"/api/v1/interrupts?kind=%00", "kind"},
		{"/api/v1/interrupts?status=%FF", "status"},
		{"/api/v1/requests?kind=%00", "kind"},
		{"/api/v1/audit?actor=%00", "actor"},
		{"/api/v1/audit?kind=%FF", "kind"},
		{"/api/v1/analytics?workflow=%00", "workflow"},
		{"/api/v1/analytics?kind=%FF&since=2026-01-01", "kind"},
		{"/api/v1/tasks/" + id + "/events?after=%00", "after"},
		{"/api/v1/tasks?x=%00", "x"},
		{"/api/v1/tasks?%FF=1", "parameter name"},
	} {
		r := e.do(t, http.MethodGet, c.path, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", c.path, r.status, r.body)
			continue
		}
		if er := r.apiErr(t); !strings.Contains(er.Message, c.param) || (er.Field != c.param && c.param != "parameter name") {
			t.Errorf("GET %s: %+v, want %s named", c.path, er, c.param)
		}
	}
	for _, c := range []struct{ path, param string }{
		{"/?q=%00", "q"},
		{"/?workflow=%FF", "workflow"},
		{"/inbox?kind=%FF", "kind"},
		{"/inbox?workflow=%00", "workflow"},
		{"/analytics?workflow=%00", "workflow"},
		{"/analytics?kind=%FF", "kind"},
		{"/analytics/tasks?workflow=%00", "workflow"},
		{"/audit?actor=%00", "actor"},
		{"/audit?kind=%FF", "kind"},
		{"/tasks/new?workflow=%00", "workflow"},
		{"/tasks/" + id + "?artifact=%FF", "artifact"},
		{"/tasks/" + id + "/fork?step=%00", "step"},
		{"/live/dashboard?q=%00", "q"},
		{"/live/inbox?kind=%FF", "kind"},
	} {
		status, _, body := e.get(t, c.path, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, c.param) || !strings.Contains(body, "cannot be stored") &&
			!strings.Contains(body, "UTF-8") {
			t.Errorf("GET %s: %d, want 400 naming %s\n%.600s", c.path, status, c.param, body)
		}
	}
	if got := e.fingerprint(t); got != fp {
		t.Errorf("refused requests changed the database: %s → %s", fp, got)
	}
}

// TestHostileTextNewTaskForm: the new-task form, URL-encoded or multipart
// (a workflow with file attachments), with U+0000 or invalid UTF-8 in a
// field comes back (400) with the message beside that field and every
// text typed kept — the bad field's too, with U+FFFD where its characters
// could not be shown — and starts nothing. Before, it was an error page
// and everything typed was lost.
func TestHostileTextNewTaskForm(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner(filesWorkflow(t)))
	before := e.count(t, "tasks")
	check := func(name string, status int, body, field, problem string, kept ...string) {
		t.Helper()
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400 and the form again", name, status)
			return
		}
		if !strings.Contains(body, `id="new-task"`) {
			t.Errorf("%s: not the form\n%.800s", name, body)
		}
		block := between(body, `data-field="`+field+`"`, `data-field="`)
		if field == "title" {
			block = between(body, `id="f-title"`, "</div>")
		}
		if !strings.Contains(block, `class="field-error"`) || !strings.Contains(block, problem) {
			t.Errorf("%s: no message saying %q beside %s\n%s", name, problem, field, block)
		}
		for _, k := range kept {
			if !strings.Contains(body, k) {
				t.Errorf("%s: %q was not kept", name, k)
			}
		}
	}
	// URL-encoded (the feature workflow has no file field).
	for _, c := range []struct{ name, field, value, problem, shown string }{
		{"NUL in the description", "input.description", "Let users\x00 export CSV", "NUL", "Let users\uFFFD export CSV"},
		{"invalid UTF-8 in the description", "input.description", "Let users \xff export CSV", "UTF-8", "Let users \uFFFD export CSV"},
		{"NUL in the title", "title", "CSV\x00export", "NUL", "CSV\uFFFDexport"},
	} {
		form := url.Values{"workflow": {"feature"}, "title": {"CSV export"}, "input.description": {"Let users export CSV"}}
		form.Set(c.field, c.value)
		status, _, body := e.postForm(t, "/tasks/new", form, false, "")
		check(c.name, status, body, c.field, c.problem, c.shown, "CSV", "Let users")
	}
	// Multipart, with a file attached.
	for _, c := range []struct {
		name, query, file, field, problem, shown string
	}{
		{"NUL in the query", "Read\x00 these", "notes.md", "input.query", "NUL", "Read\uFFFD these"},
		{"invalid UTF-8 in the query", "Read \xfe\xff these", "notes.md", "input.query", "UTF-8", "Read \uFFFD these"},
		{"invalid UTF-8 in a file's name", "Read these", "n\xffotes.md", "input.files", "name is not valid UTF-8", "Read these"},
	} {
		status, _, body := e.postMultipart(t, "files", []string{"title", "My files", "input.query", c.query},
			map[string]string{c.file: "# Notes"})
		check(c.name, status, body, c.field, c.problem, c.shown, "My files", "attach them again")
	}
	if n := e.count(t, "tasks"); n != before {
		t.Errorf("%d tasks started by refused forms", n-before)
	}
}

// TestHostileTextSlack: a signed Slack callback with U+0000 or invalid
// UTF-8 in its payload (the user, the button's value) or its form decides
// nothing; the person who clicked is told so in an ephemeral message
// naming the field (what Slack shows), or, when the response_url itself is
// what is wrong, the answer is 400 naming it. The same click with clean
// text then approves.
func TestHostileTextSlack(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("alice", auth.RoleApprover)
	if err := e.auth.SetSlack(context.Background(), "test", "alice", "U0ALICE"); err != nil {
		t.Fatal(err)
	}
	ts := slackServer(t, e)
	responses := newSlackHook(t)
	id := e.createFeature("Hostile Slack")
	itr := e.waitPending(id, "prd")
	payload := func(user, responseURL, value string) string {
		return `{"type":"block_actions","user":{"id":"` + user + `"},"response_url":"` + responseURL +
			`","actions":[{"action_id":"approve","value":"` + value + `"}]}`
	}
	post := func(form url.Values) (int, string) {
		body := form.Encode()
		now := strconv.FormatInt(time.Now().Unix(), 10)
		return postSlack(t, ts.URL, body, now, signSlack(now, body))
	}
	fp := e.fingerprint(t)
	rurl := responses.srv.URL
	for _, c := range []struct {
		name  string
		form  url.Values
		field string
	}{
		{"NUL in the user", url.Values{"payload": {payload(`U0ALICE\u0000`, rurl, itr.ID)}}, "payload.user.id"},
		{"invalid UTF-8 in the user", url.Values{"payload": {payload("U0ALICE\xff", rurl, itr.ID)}}, "payload.user.id"},
		{"NUL in the button's value", url.Values{"payload": {payload("U0ALICE", rurl, itr.ID+`\u0000`)}}, "payload.actions[0].value"},
		{"NUL in another field", url.Values{"payload": {payload("U0ALICE", rurl, itr.ID)}, "team": {"T\x00"}}, "team"},
	} {
		code, _ := post(c.form)
		if code != http.StatusOK {
			t.Errorf("%s: %d, want 200 and an ephemeral message", c.name, code)
			continue
		}
		r := responses.next(t)
		text, _ := r["text"].(string)
		if r["response_type"] != "ephemeral" || !strings.HasPrefix(text, "Nothing was decided") || !strings.Contains(text, c.field) {
			t.Errorf("%s: %v, want an ephemeral refusal naming %s", c.name, r, c.field)
		}
	}
	code, body := post(url.Values{"payload": {payload("U0ALICE", rurl+`\u0000`, itr.ID)}})
	if code != http.StatusBadRequest || !strings.Contains(body, "payload.response_url") {
		t.Errorf("NUL in the response_url: %d %s, want 400 naming it", code, body)
	}
	if got := e.fingerprint(t); got != fp {
		t.Errorf("refused callbacks changed the database: %s → %s", fp, got)
	}
	if code, _ := post(url.Values{"payload": {payload("U0ALICE", rurl, itr.ID)}}); code != http.StatusOK {
		t.Fatalf("clean callback: %d", code)
	}
	if r := responses.next(t); r["replace_original"] != true {
		t.Errorf("clean callback: %v, want the approval", r)
	}
}

// TestHostileTextActionLink: the email's action page posted with U+0000
// or invalid UTF-8 in the feedback (or any field) comes back as the form
// (400) with the message and the feedback kept, U+FFFD where it could not
// be shown; nothing is decided and the link still works.
func TestHostileTextActionLink(t *testing.T) {
	t.Parallel()
	e := setup(t, mailOpts())
	smtp := e.approverByMail(t, "alice")
	id := e.createAs(t, "carol", "Hostile link", `{}`)
	e.waitPending(id, "prd")
	link := actLinkOf(t, smtp.Wait(t, 1, 30*time.Second)[0])
	_, _, page := e.rawDo(t, http.MethodGet, link, "", nil)
	key := formKeyRe.FindStringSubmatch(page)[1]
	fp := e.fingerprint(t)
	for _, c := range []struct{ name, field, value, msg, kept string }{
		{"NUL in the feedback", "feedback", "Too\x00 vague", "feedback contains a NUL character", "Too\uFFFD vague"},
		{"invalid UTF-8 in the feedback", "feedback", "Too \xff vague", "feedback is not valid UTF-8", "Too \uFFFD vague"},
		{"NUL in another field", "note", "x\x00", "note contains a NUL character", ""},
	} {
		form := url.Values{"action": {"reject"}, "_act": {key}, "feedback": {"Too vague"}}
		form.Set(c.field, c.value)
		status, _, body := e.rawDo(t, http.MethodPost, link, "", form)
		if status != http.StatusBadRequest || !strings.Contains(body, `id="act-form"`) || !strings.Contains(body, c.msg) {
			t.Errorf("%s: %d, want the form again saying %q\n%.1500s", c.name, status, c.msg, body)
		}
		if c.kept != "" && !strings.Contains(body, ">"+c.kept+"</textarea>") {
			t.Errorf("%s: the feedback %q was not kept", c.name, c.kept)
		}
	}
	if got := e.fingerprint(t); got != fp {
		t.Errorf("refused posts changed the database: %s → %s", fp, got)
	}
	status, _, body := e.rawDo(t, http.MethodPost, link, "", url.Values{"action": {"reject"}, "_act": {key}, "feedback": {"Too vague"}})
	if status != http.StatusOK || !strings.Contains(body, "alice rejected") {
		t.Errorf("the clean post: %d\n%.800s", status, body)
	}
}

// TestHostileTextFork: a fork with text that cannot be stored — U+0000 or
// invalid UTF-8 in the title or a state field, a \u0000 escape in the
// merge patch typed on the desk or in the API's state — is refused (400)
// naming the field: on the desk, the form again with the message beside
// the field and everything typed kept. No task is forked.
func TestHostileTextFork(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Hostile fork")
	e.waitPending(id, "prd")
	fp := e.fingerprint(t)
	for _, c := range []struct{ name, body, field string }{
		{"state NUL", `{"step":0,"state":{"description":"Let users\u0000 export"}}`, "state.description"},
		{"title UTF-8", "{\"step\":0,\"title\":\"Re-run \xff\"}", "title"},
	} {
		r := e.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fork", c.body)
		if r.status != http.StatusBadRequest || r.apiErr(t).Field != c.field {
			t.Errorf("API %s: %d %s, want 400 naming %s", c.name, r.status, r.body, c.field)
		}
	}
	typed := map[string]string{"title": "Re-run, kept", "patch": `{"note": "kept"}`}
	for _, c := range []struct {
		name, field, value, block, msg, kept string
	}{
		{"NUL in a state field", "state.description", "Let users\x00 export", `data-field="state.description"`, "NUL character", "Let users\uFFFD export"},
		{"invalid UTF-8 in the title", "title", "Re-run \xff", `id="fork-title"`, "UTF-8", "Re-run \uFFFD"},
		{"a \\u0000 escape in the patch", "patch", `{"description": "Let users\u0000 export"}`, `id="fork-patch"`, "description contains a NUL character", `Let users\u0000 export`},
	} {
		form := url.Values{"step": {"0"}}
		for f, v := range typed {
			form.Set(f, v)
		}
		form.Set(c.field, c.value)
		status, _, body := e.postForm(t, "/tasks/"+id+"/fork", form, false, "")
		if status != http.StatusBadRequest || !strings.Contains(body, `id="fork-form"`) {
			t.Errorf("%s: %d, want the form again (400)", c.name, status)
			continue
		}
		to := "</div>"
		if c.field == "patch" {
			to = "</details>"
		}
		if block := between(body, c.block, to); !strings.Contains(block, `class="field-error"`) || !strings.Contains(block, c.msg) ||
			!strings.Contains(block, html.EscapeString(c.kept)) {
			t.Errorf("%s: want %q beside the field and %q kept:\n%s", c.name, c.msg, c.kept, block)
		}
		for f, v := range typed {
			if f != c.field && !strings.Contains(body, html.EscapeString(v)) {
				t.Errorf("%s: %s %q was not kept", c.name, f, v)
			}
		}
	}
	if got := e.fingerprint(t); got != fp {
		t.Errorf("refused forks changed the database: %s → %s", fp, got)
	}
}

// TestHostileTextDeskForms: the desk's other forms that post without
// htmx — sign-in, add a user, a user's contact, create a token, change
// one's password, add a webhook — with U+0000 or invalid UTF-8 come back
// as their own page (400) with the message naming the field and the text
// typed kept where the form keeps it; a path parameter with such text is
// 400 naming it. Nothing changes. Before, each was an error page.
func TestHostileTextDeskForms(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("bob", auth.RoleApprover)
	e.session(defaultUser) // ann, the admin who posts
	fp := e.deskFingerprint(t)
	count := func(table string) int { return e.count(t, table) }
	users, tokens, hooks := count("users"), count("api_tokens"), count("webhook_endpoints")
	for _, c := range []struct {
		name, path string
		form       url.Values
		page, msg  string
		kept       string
	}{
		{"add user", "/admin/users", url.Values{"username": {"dora\x00"}, "role": {"approver"}, "password": {"dora-password-1"},
			"email": {"dora@example.com"}}, `action="/admin/users"`, "username contains a NUL character", `value="dora` + "\uFFFD" + `"`},
		{"user contact", "/admin/users/bob", url.Values{"op": {"contact"}, "email": {"bob@example.com\xff"}},
			`action="/admin/users"`, "email is not valid UTF-8", ""},
		{"create token", "/admin/tokens", url.Values{"name": {"ci\x00bot"}, "role": {"operator"}},
			`action="/admin/tokens"`, "name contains a NUL character", ""},
		{"change password", "/account/password", url.Values{"current": {password("ann")}, "password": {"new\x00password-1"},
			"repeat": {"new\x00password-1"}}, `id="password-form"`, "password contains a NUL character", ""},
		{"add webhook", "/admin/webhooks", url.Values{"url": {"https://hooks.example.com/\xff"}, "events": {"interrupt.raised"}},
			`action="/admin/webhooks"`, "url is not valid UTF-8", `value="https://hooks.example.com/` + "\uFFFD" + `"`},
		{"path parameter", "/admin/users/bo%00b", url.Values{"op": {"contact"}, "email": {"bob@example.com"}}, "", "name contains a NUL", ""},
	} {
		status, _, body := e.postForm(t, c.path, c.form, false, "")
		if status != http.StatusBadRequest || !strings.Contains(body, c.page) || !strings.Contains(body, c.msg) ||
			!strings.Contains(body, c.kept) {
			t.Errorf("%s: %d, want its form again (400) saying %q and keeping %q\n%.1500s", c.name, status, c.msg, c.kept, body)
		}
	}
	// Sign-in, as a browser without a session posts it.
	br := newBrowser(t)
	_, _, page := br.do(http.MethodGet, e.base+"/login", nil)
	status, _, body := br.do(http.MethodPost, e.base+"/login", url.Values{"username": {"ann\x00"}, "password": {password("ann")},
		"_csrf": {between(page, `name="_csrf" value="`, `"`)}, "next": {"/"}})
	if status != http.StatusBadRequest || !strings.Contains(body, `action="/login"`) || !strings.Contains(body, "username contains a NUL") ||
		!strings.Contains(body, `value="ann`+"\uFFFD"+`"`) || br.hasSession(e.base) {
		t.Errorf("sign-in: %d, want the sign-in form again (400) naming username\n%.1500s", status, body)
	}
	if got := e.deskFingerprint(t); got != fp || count("users") != users || count("api_tokens") != tokens || count("webhook_endpoints") != hooks {
		t.Errorf("refused forms changed the database")
	}
}
