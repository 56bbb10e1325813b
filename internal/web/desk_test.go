package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// get fetches a desk URL as the default user, without following
// redirects.
func (e *bundle) get(t *testing.T, path string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	sess := e.session(defaultUser)
	return e.getAs(t, &sess, path, header)
}

// postForm posts a form as a page (or htmx, with hx) of the default user
// would, with the session's CSRF token.
func (e *bundle) postForm(t *testing.T, path string, form url.Values, hx bool, origin string) (int, http.Header, string) {
	t.Helper()
	sess := e.session(defaultUser)
	return e.postAs(t, &sess, path, form, postOpts{hx: hx, origin: origin})
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestDeskPagesAndStatic(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	for _, p := range []string{"/", "/inbox", "/tasks/new", "/?status=waiting", "/inbox?kind=prd"} {
		status, h, body := e.get(t, p, nil)
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", p, status, h.Get("Content-Type"))
		}
		// Nothing from another origin, no inline script.
		for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			if strings.Contains(m[1], "//") {
				t.Errorf("%s links another origin: %s", p, m[1])
			}
		}
		for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
			if !strings.Contains(m, `src="/static/`) {
				t.Errorf("%s has an inline script: %s", p, m)
			}
		}
	}
	_, _, body := e.get(t, "/", nil)
	css := regexp.MustCompile(`href="(/static/app\.[0-9a-f]{12}\.css)"`).FindStringSubmatch(body)
	js := regexp.MustCompile(`src="(/static/vendor/htmx\.min\.[0-9a-f]{12}\.js)"`).FindStringSubmatch(body)
	if css == nil || js == nil {
		t.Fatalf("no hashed static URLs in the page")
	}
	status, h, _ := e.get(t, css[1], nil)
	if status != http.StatusOK || h.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		!strings.HasPrefix(h.Get("Content-Type"), "text/css") {
		t.Fatalf("GET %s: %d %v", css[1], status, h)
	}
	if status, _, _ := e.get(t, css[1], map[string]string{"If-None-Match": h.Get("ETag")}); status != http.StatusNotModified {
		t.Fatalf("conditional GET: %d, want 304", status)
	}
	status, h, text := e.get(t, js[1], map[string]string{"Accept-Encoding": "gzip"})
	if status != http.StatusOK || h.Get("Content-Encoding") != "gzip" || !strings.Contains(text, "htmx") {
		t.Fatalf("GET %s gzip: %d %v", js[1], status, h)
	}
	for _, p := range []string{"/static/app.000000000000.css", "/static/app.css", "/static/../go.mod"} {
		if status, _, _ := e.get(t, p, nil); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, status)
		}
	}
	status, h, body = e.get(t, "/tasks/00000000-0000-0000-0000-000000000000", nil)
	if status != http.StatusNotFound || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "Not found") {
		t.Fatalf("unknown task: %d %s", status, h.Get("Content-Type"))
	}
}

// TestDeskDecideForm checks the decision form's answers at the HTTP level:
// refusals keep the input and say why; a late submit gets the decision
// that won, never an error page.
func TestDeskDecideForm(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Decide by form")
	itr := e.waitPending(id, "prd")
	path := "/tasks/" + id + "/decide"

	status, _, body := e.postForm(t, path, url.Values{"interrupt_id": {itr.ID}, "action": {"reject"},
		"feedback": {"   "}}, true, "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "a rejection needs feedback") ||
		!strings.Contains(body, `id="interrupt"`) {
		t.Fatalf("reject without feedback: %d %s", status, body)
	}
	if status, _, _ := e.postForm(t, path, url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}},
		true, "http://evil.example"); status != http.StatusForbidden {
		t.Fatalf("cross-origin decision: %d, want 403", status)
	}
	status, _, body = e.postForm(t, path, url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}}, true, e.base)
	if status != http.StatusOK || !strings.Contains(body, "approved") || !strings.Contains(body, defaultUser) {
		t.Fatalf("approve: %d %s", status, body)
	}
	// The decision is the signed-in user's, whatever the form says.
	bea := e.session("bea")
	status, _, body = e.postAs(t, &bea, path, url.Values{"interrupt_id": {itr.ID}, "action": {"reject"},
		"feedback": {"too late"}}, postOpts{hx: true})
	if status != http.StatusConflict || !strings.Contains(body, "Someone decided before you") ||
		!regexp.MustCompile(`approved</strong> by <strong class="decided-by">`+defaultUser).MatchString(body) {
		t.Fatalf("late htmx submit: %d %s", status, body)
	}
	status, h, body := e.postAs(t, &bea, path, url.Values{"interrupt_id": {itr.ID}, "action": {"approve"}}, postOpts{})
	if status != http.StatusConflict || !strings.HasPrefix(h.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, "<!doctype html>") || !strings.Contains(body, "Someone decided before you") {
		t.Fatalf("late plain submit: %d %s", status, h.Get("Content-Type"))
	}
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM decisions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("decisions: %d (%v), want 1", n, err)
	}
}

func TestDeskNewTaskForm(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	status, h, _ := e.postForm(t, "/tasks/new", url.Values{"workflow": {"feature"}, "input.description": {"Add dark mode."},
		"gate.allowPrd": {"human"}}, false, "")
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/tasks/") {
		t.Fatalf("create: %d %v", status, h)
	}
	id := strings.TrimPrefix(h.Get("Location"), "/tasks/")
	task, err := e.store.Task(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var opts map[string]map[string]bool
	if err := json.Unmarshal(task.Options, &opts); err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"allowPrd": false, "allowPlan": true, "allowMerge": true}; !mapsEqual(opts["gates"], want) {
		t.Errorf("gates %v, want %v", opts["gates"], want)
	}
	if task.Title != "Add dark mode." {
		t.Errorf("title %q", task.Title)
	}
	status, _, body := e.postForm(t, "/tasks/new", url.Values{"workflow": {"feature"}, "input.description": {"ok"},
		"input.name": {strings.Repeat("n", 101)}, "title": {"t"}}, false, "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "This is 1 character over the limit of 100 (it has 101)") {
		t.Fatalf("long name: %d", status)
	}
	// The schema's pattern, with its message in words; nothing started.
	status, _, body = e.postForm(t, "/tasks/new", url.Values{"workflow": {"feature"}, "input.description": {"ok"},
		"input.name": {"CSV Export"}}, false, "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "Use kebab-case: lower-case letters and digits") ||
		!strings.Contains(body, `value="CSV Export"`) {
		t.Fatalf("name not kebab-case: %d", status)
	}
	if status, _, _ := e.postForm(t, "/tasks/new", url.Values{"workflow": {"nope"}}, false, ""); status != http.StatusNotFound {
		t.Fatalf("unknown workflow: %d", status)
	}
	// The request workflow is served but unlisted (its tasks are made by
	// /api/v1/requests): not offered, not found by name, nothing started.
	if status, _, body := e.get(t, "/tasks/new", nil); status != http.StatusOK || !strings.Contains(body, `<option value="feature"`) ||
		strings.Contains(body, `<option value="request"`) {
		t.Fatalf("the form's workflows: %d", status)
	}
	if status, _, _ := e.get(t, "/tasks/new?workflow=request", nil); status != http.StatusNotFound {
		t.Fatalf("the form of request: %d", status)
	}
	var before int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM tasks").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.postForm(t, "/tasks/new", url.Values{"workflow": {"request"}, "title": {"sneaked in"}}, false, ""); status != http.StatusNotFound {
		t.Fatalf("a task of request: %d", status)
	}
	var after int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM tasks").Scan(&after); err != nil || after != before {
		t.Fatalf("%d tasks, was %d (%v)", after, before, err)
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// askState is the state of a one-question workflow.
type askState struct {
	Answer string `json:"answer"`
}

func askWorkflow(t *testing.T) graph.Workflow {
	t.Helper()
	g, err := graph.New[askState]("ask").
		Node("ask", func(_ context.Context, run *graph.NodeRun, s askState) (askState, error) {
			a, err := run.Ask(graph.Question{Title: "Budget", Text: "What is the <b>budget</b>?"})
			if err != nil {
				return s, err
			}
			s.Answer = a.Text
			return s, nil
		}).
		Edge("ask", graph.END).
		Init(func(json.RawMessage, graph.Options) (askState, error) { return askState{}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestDeskRespondAndEdit: a question answered from its form shows up as a
// thread; an edit is checked by the workflow before it is accepted.
func TestDeskRespondAndEdit(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner(askWorkflow(t)))
	task, err := e.engine.Create(t.Context(), graph.NewTask{Workflow: "ask", Title: "Ask me", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.Wake()
	itr := e.waitPending(task.ID, "question")
	_, _, page := e.get(t, "/tasks/"+task.ID, nil)
	for _, want := range []string{"What is the &lt;b&gt;budget&lt;/b&gt;?", `name="action" value="respond"`, `<textarea id="answer" name="value"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("question page misses %q", want)
		}
	}
	path := "/tasks/" + task.ID + "/decide"
	if status, _, body := e.postForm(t, path, url.Values{"interrupt_id": {itr.ID}, "action": {"respond"}},
		true, ""); status != http.StatusUnprocessableEntity || !strings.Contains(body, "Write an answer") {
		t.Fatalf("empty answer: %d %s", status, body)
	}
	if status, _, body := e.postForm(t, path, url.Values{"interrupt_id": {itr.ID}, "action": {"respond"},
		"value": {"Ten thousand"}}, true, ""); status != http.StatusOK || !strings.Contains(body, "answered") {
		t.Fatalf("answer: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk, err := e.store.Task(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status == graph.StatusSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s after the answer", tk.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, page = e.get(t, "/tasks/"+task.ID, nil)
	if !regexp.MustCompile(`(?s)class="thread".*budget.*Ten thousand`).MatchString(page) {
		t.Fatalf("no question-and-answer thread on the page")
	}

	// Edit: the PRD editor's content is checked by the workflow.
	id := e.createFeature("Edit me")
	prd := e.waitPending(id, "prd")
	path = "/tasks/" + id + "/decide"
	status, _, body := e.postForm(t, path, url.Values{"interrupt_id": {prd.ID}, "action": {"edit"},
		"value": {"name: [broken"}}, true, "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "name: [broken") || !strings.Contains(body, "does not parse") {
		t.Fatalf("bad edit: %d %s", status, body)
	}
	edited := prd.Payload.Artifact.Content + "\n# edited by Ann\n"
	if status, _, body := e.postForm(t, path, url.Values{"interrupt_id": {prd.ID}, "action": {"edit"},
		"value": {edited}}, true, ""); status != http.StatusOK || !strings.Contains(body, "approved with edits") {
		t.Fatalf("edit: %d %s", status, body)
	}
}

// filesWorkflow is a one-node workflow whose input has a query and an
// array of {name, content}: the form uploads files for it.
func filesWorkflow(t *testing.T) graph.Workflow {
	t.Helper()
	g, err := graph.New[map[string]any]("files").
		Node("read", func(_ context.Context, _ *graph.NodeRun, s map[string]any) (map[string]any, error) { return s, nil }).
		Edge("read", graph.END).
		Init(func(in json.RawMessage, _ graph.Options) (map[string]any, error) {
			var m map[string]any
			return m, json.Unmarshal(in, &m)
		}).
		InputSchema(json.RawMessage(`{"type":"object","required":["query"],"properties":{
			"query":{"type":"string","maxLength":1000},
			"files":{"type":"array","maxItems":2,"items":{"type":"object","properties":{
				"name":{"type":"string"},"content":{"type":"string","maxLength":1024}}}}}}`)).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// postMultipart posts the new-task form of workflow as multipart, as the
// default user's browser does when it has a file field: fields (names and
// values, in order) and the files of input.files.
func (e *bundle) postMultipart(t *testing.T, workflow string, fields []string, files map[string]string) (int, http.Header, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	sess := e.session(defaultUser)
	_ = mw.WriteField(csrfField, sess.csrf)
	_ = mw.WriteField("workflow", workflow)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	for name, content := range files {
		w, _ := mw.CreateFormFile("input.files", name)
		_, _ = io.WriteString(w, content)
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.base+"/tasks/new", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(sess.cookie)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// TestDeskNewTaskFiles: a schema's array of {name, content} is a file
// upload; the files become the input.
func TestDeskNewTaskFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner(filesWorkflow(t)))
	_, _, page := e.get(t, "/tasks/new?workflow=files", nil)
	if !strings.Contains(page, `enctype="multipart/form-data"`) || !strings.Contains(page, `type="file" multiple`) {
		t.Fatal("no file upload in the form")
	}
	post := func(files map[string]string) (int, http.Header, string) {
		return e.postMultipart(t, "files", []string{"input.query", "Read these"}, files)
	}
	status, _, body := post(map[string]string{"big.txt": strings.Repeat("x", 2000)})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "big.txt is larger than 1 KiB") ||
		!strings.Contains(body, "attach them again") || !strings.Contains(body, "Read these") {
		t.Fatalf("big file: %d", status)
	}
	status, h, _ := post(map[string]string{"notes.md": "# Notes\nhello"})
	if status != http.StatusSeeOther {
		t.Fatalf("upload: %d", status)
	}
	task, err := e.store.Task(t.Context(), strings.TrimPrefix(h.Get("Location"), "/tasks/"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Files []map[string]string `json:"files"`
	}
	if err := json.Unmarshal(task.Input, &in); err != nil || len(in.Files) != 1 || in.Files[0]["name"] != "notes.md" ||
		in.Files[0]["content"] != "# Notes\nhello" {
		t.Fatalf("input %s (%v)", task.Input, err)
	}
}

// TestDeskCancel: the cancel button ends the task and withdraws its
// decision; cancelling again says why it cannot, as a page.
func TestDeskCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Cancel me")
	e.waitPending(id, "prd")
	if status, h, _ := e.postForm(t, "/tasks/"+id+"/cancel", url.Values{}, false, ""); status != http.StatusSeeOther ||
		h.Get("Location") != "/tasks/"+id {
		t.Fatalf("cancel: %d %v", status, h)
	}
	task, err := e.store.Task(t.Context(), id)
	if err != nil || task.Status != graph.StatusCancelled {
		t.Fatalf("task after cancel: %+v %v", task, err)
	}
	_, _, page := e.get(t, "/tasks/"+id, nil)
	if !strings.Contains(page, `data-task-status="cancelled"`) || strings.Contains(page, `article class="card pending"`) ||
		strings.Contains(page, "Cancel task") {
		t.Fatal("cancelled task page still offers a decision or a cancel")
	}
	status, h, body := e.postForm(t, "/tasks/"+id+"/cancel", url.Values{}, true, "")
	if status != http.StatusConflict || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "cancelled") {
		t.Fatalf("second cancel: %d %s", status, h.Get("Content-Type"))
	}
}
