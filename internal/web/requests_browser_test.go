package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// createRequest makes an approval request through the API as the
// bootstrap token and returns its id (the task's).
func (e *bundle) createRequest(t *testing.T, body map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+"/api/v1/requests", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create request: %d %v", resp.StatusCode, err)
	}
	return out.ID
}

// decisionsOf is how many decisions the task has, and the last one's
// action and value as stored (jsonb, as text).
func (e *bundle) decisionsOf(t *testing.T, id string) (n int, action, value string) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT count(*) OVER (), action, COALESCE(value::text, '')
		FROM decisions WHERE task_id = $1 ORDER BY decided_at DESC LIMIT 1`, id).Scan(&n, &action, &value)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	return n, action, value
}

// storedIs reports whether the task's one decision is action with value
// equal, as JSON, to want.
func (e *bundle) storedIs(t *testing.T, id, action, want string) {
	t.Helper()
	var ok bool
	err := e.pool.QueryRow(context.Background(), `SELECT count(*) = 1 AND bool_and(action = $2 AND value = $3::jsonb)
		FROM decisions WHERE task_id = $1`, id, action, want).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		n, a, v := e.decisionsOf(t, id)
		t.Fatalf("task %s: %d decisions, last %s %s; want one %s %s", id, n, a, v, action, want)
	}
}

// fillJS sets a typed answer's controls in the form matched by form:
// strings for text, number, text area and select controls, a boolean for a
// checkbox, a list for several choices.
func fillJS(form string, values map[string]any) string {
	vals, _ := json.Marshal(values)
	return `(function(){var f=document.querySelector(` + jsq(form) + `),v=` + string(vals) + `;` +
		`for(var k in v){var els=f.querySelectorAll('[name="answer.'+k+'"]');` +
		`if(!els.length)throw new Error("no control "+k);` +
		`els.forEach(function(el){if(el.type==="checkbox"){el.checked=Array.isArray(v[k])?v[k].indexOf(el.value)>=0:!!v[k];}else{el.value=v[k];}` +
		`el.dispatchEvent(new Event("input",{bubbles:true}));el.dispatchEvent(new Event("change",{bubbles:true}));});}` +
		`return true})()`
}

// answerCase is a response_schema, the controls it draws, an answer the
// schema refuses (with the fields it names) and one it takes (with the
// typed value stored).
type answerCase struct {
	name    string
	schema  any
	order   string            // the fields' order on the page, when it matters
	widgets map[string]string // field → data-widget
	wrong   map[string]any
	errors  []string
	right   map[string]any
	stored  string
}

func answerCases() []answerCase {
	enum := func(vals ...string) []string { return vals }
	return []answerCase{
		// Written in the order the desk must keep (the schema is stored
		// as jsonb, which sorts keys).
		{name: "Object", schema: json.RawMessage(`{"type": "object", "required": ["env", "reason", "replicas"], "properties": {
			"reason":   {"type": "string", "format": "textarea", "minLength": 10, "title": "Why"},
			"env":      {"type": "string", "enum": ["staging", "prod"], "title": "Environment", "description": "Where the change goes"},
			"replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2, "title": "Replicas"},
			"ratio":    {"type": "number", "minimum": 0, "maximum": 1, "title": "Canary share"},
			"ticket":   {"type": "string", "pattern": "^[A-Z]+-[0-9]+$", "maxLength": 12, "title": "Ticket"},
			"regions":  {"type": "array", "items": {"type": "string", "enum": ["eu", "us", "ap"]}, "minItems": 1, "maxItems": 2, "title": "Regions"},
			"notify":   {"type": "boolean", "default": true, "title": "Tell the on-call"}}}`),
			order: "reason,env,replicas,ratio,ticket,regions,notify",
			widgets: map[string]string{"env": "select", "reason": "textarea", "ticket": "text", "replicas": "number", "ratio": "number",
				"notify": "checkbox", "regions": "choices"},
			wrong: map[string]any{"env": "", "reason": "too short", "ticket": "ops 12", "replicas": "11", "ratio": "1.5",
				"notify": false, "regions": []string{"eu", "us", "ap"}},
			errors: []string{"env", "reason", "ticket", "replicas", "ratio", "regions"},
			right: map[string]any{"env": "prod", "reason": "The queue is backing up", "ticket": "OPS-12", "replicas": "3", "ratio": "0.25",
				"notify": false, "regions": []string{"eu", "ap"}},
			stored: `{"env":"prod","reason":"The queue is backing up","ticket":"OPS-12","replicas":3,"ratio":0.25,"notify":false,"regions":["eu","ap"]}`},
		{name: "Text", schema: map[string]any{"type": "string", "minLength": 3, "title": "Your name for it"},
			widgets: map[string]string{"value": "text"}, wrong: map[string]any{"value": "ab"}, errors: []string{"value"},
			right: map[string]any{"value": "yes please"}, stored: `"yes please"`},
		{name: "TextArea", schema: map[string]any{"type": "string", "format": "textarea", "maxLength": 20},
			widgets: map[string]string{"value": "textarea"}, wrong: map[string]any{"value": strings.Repeat("x", 25)}, errors: []string{"value"},
			right: map[string]any{"value": "short\nand sweet"}, stored: `"short\nand sweet"`},
		{name: "Integer", schema: map[string]any{"type": "integer", "minimum": 0, "maximum": 5},
			widgets: map[string]string{"value": "number"}, wrong: map[string]any{"value": "9"}, errors: []string{"value"},
			right: map[string]any{"value": "4"}, stored: `4`},
		{name: "Number", schema: map[string]any{"type": "number", "maximum": 1},
			widgets: map[string]string{"value": "number"}, wrong: map[string]any{"value": "2.5"}, errors: []string{"value"},
			right: map[string]any{"value": "0.5"}, stored: `0.5`},
		{name: "Choice", schema: map[string]any{"type": "string", "enum": enum("a", "b", "c")},
			widgets: map[string]string{"value": "select"}, wrong: map[string]any{"value": ""}, errors: []string{"value"},
			right: map[string]any{"value": "b"}, stored: `"b"`},
		{name: "Choices", schema: map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": enum("x", "y", "z")}, "minItems": 1},
			widgets: map[string]string{"value": "choices"}, wrong: map[string]any{"value": []string{}}, errors: []string{"value"},
			right: map[string]any{"value": []string{"x", "z"}}, stored: `["x","z"]`},
		{name: "Boolean", schema: map[string]any{"type": "boolean", "title": "Ship it?"},
			widgets: map[string]string{"value": "checkbox"}, right: map[string]any{"value": true}, stored: `true`},
	}
}

// TestRequestAnswerFormsInBrowser (issue 23, items 2 and 4): every form a
// response_schema may take is drawn as labelled controls on the task
// page, checked by the browser, and — with the browser's checks switched
// off, as a hand-made post would be — refused by the server with a message
// beside each wrong field, the input kept and nothing recorded; the right
// answer is stored typed in PostgreSQL. The same on the email action page.
func TestRequestAnswerFormsInBrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, mailOpts())
	smtp := e.approverByMail(t, "alice")
	b := e.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(1366, 900))
	console := b.watchConsole()

	form := `#interrupt form.respond`
	for _, c := range answerCases() {
		id := e.createRequest(t, map[string]any{"kind": "deploy_check", "title": "Answer " + c.name, "response_schema": c.schema})
		b.Navigate(e.base + "/tasks/" + id)
		b.waitJS(`document.querySelector(`+jsq(form)+`)`, 20*time.Second)
		for field, widget := range c.widgets {
			sel := form + ` [data-field="` + field + `"][data-widget="` + widget + `"]`
			if !b.Exists(sel) {
				t.Fatalf("%s: no %s control for %s: %s", c.name, widget, field, b.text(form))
			}
			if label := b.text(sel + ` label, ` + sel + ` legend`); strings.TrimSpace(label) == "" {
				t.Errorf("%s: %s has no label", c.name, field)
			}
		}
		if c.order != "" {
			got := eval[string](b, `[].map.call(document.querySelectorAll(`+jsq(form+` [data-field]`)+`), function(el){return el.dataset.field}).join(",")`)
			if got != c.order {
				t.Errorf("%s: fields in the order %s, want %s", c.name, got, c.order)
			}
		}
		if c.name == "Object" {
			// Defaults and help, and the browser's own checks: the empty
			// required choice stops a submit before it leaves the page.
			if got := eval[string](b, `document.querySelector('[name="answer.replicas"]').value`); got != "2" {
				t.Errorf("replicas default %q, want 2", got)
			}
			if !eval[bool](b, `document.querySelector('[name="answer.notify"]').checked`) {
				t.Error("notify is not checked by its default")
			}
			if !strings.Contains(b.text(form+` [data-field="env"] .help`), "Where the change goes") {
				t.Error("env's description is not its help")
			}
			if eval[bool](b, `document.querySelector(`+jsq(form)+`).checkValidity()`) {
				t.Error("the browser takes a form whose required fields are empty")
			}
		}
		if c.wrong != nil {
			eval[bool](b, fillJS(form, c.wrong))
			eval[bool](b, `(document.querySelector(`+jsq(form)+`).noValidate = true, true)`)
			b.click(form + ` button[value=respond]`)
			last := c.errors[len(c.errors)-1]
			b.waitJS(`document.querySelector(`+jsq(form+` [data-error-for="`+last+`"]`)+`)`, 20*time.Second)
			for _, field := range c.errors {
				sel := form + ` [data-field="` + field + `"].invalid [data-error-for="` + field + `"]`
				if msg := b.text(sel); msg == "" {
					t.Errorf("%s: no error beside %s: %s", c.name, field, b.text(form))
				}
			}
			if b.Count(form+` .field-error`) != len(c.errors) {
				t.Errorf("%s: %d field errors, want %d: %s", c.name, b.Count(form+` .field-error`), len(c.errors), b.text(form))
			}
			if !strings.Contains(b.text(`#interrupt .alert`), "Not recorded") {
				t.Errorf("%s: no 'not recorded' alert: %q", c.name, b.text(`#interrupt .alert`))
			}
			if n, _, _ := e.decisionsOf(t, id); n != 0 {
				t.Fatalf("%s: a wrong answer recorded %d decisions", c.name, n)
			}
			if c.name == "Object" {
				// The input is kept as typed.
				kept := eval[string](b, `[].map.call(document.querySelectorAll(`+jsq(form+` [name^="answer."]`)+`), function(el){`+
					`return el.name+"="+(el.type==="checkbox"?el.checked:el.value)}).join("&")`)
				for _, want := range []string{"answer.reason=too short", "answer.ticket=ops 12", "answer.replicas=11", "answer.ratio=1.5",
					"answer.regions=true", "answer.notify=false"} {
					if !strings.Contains(kept, want) {
						t.Errorf("input not kept: %s not in %s", want, kept)
					}
				}
				b.screenshot("object-wrong-1366")
				b.do(chromedp.EmulateViewport(390, 844))
				b.screenshot("object-wrong-390")
				b.do(chromedp.EmulateViewport(1366, 900))
			}
		}
		eval[bool](b, fillJS(form, c.right))
		b.click(form + ` button[value=respond]`)
		b.waitJS(`document.querySelector('#interrupt .outcome[data-action="respond"]')`, 20*time.Second)
		e.storedIs(t, id, "respond", c.stored)
		if c.name == "Object" {
			// The answer reads as labelled values, in the form's order.
			want := "Why: The queue is backing up · Environment: prod · Replicas: 3 · Canary share: 0.25 · Ticket: OPS-12 · Regions: eu, ap · Tell the on-call: no"
			b.waitJS(`(document.querySelector('#interrupt .outcome .feedback-text')||{}).textContent === `+jsq(want), 20*time.Second)
			b.screenshot("object-answered-1366")
		}
	}

	// The email action page draws the same controls and refuses the same
	// way, as alice, the link's recipient.
	id := e.createRequest(t, map[string]any{"kind": "deploy_check", "title": "Answer by link", "response_schema": answerCases()[0].schema,
		"description": "Pick **one** environment."})
	var link string
	for deadline := time.Now().Add(30 * time.Second); link == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, m := range smtp.Messages() {
			if strings.Contains(m.Header.Get("Subject"), "Answer by link") {
				link = actLinkOf(t, m)
			}
		}
	}
	if link == "" {
		t.Fatal("no email with an action link for the request")
	}
	a := openTab(t, "alice-link")
	a.do(chromedp.EmulateViewport(390, 844))
	a.Navigate(e.base + link)
	actForm := `#act-form`
	a.waitJS(`document.querySelector(`+jsq(actForm+` [data-field="regions"]`)+`)`, 20*time.Second)
	if !a.Exists(`.request-description strong`) || !strings.Contains(a.text(`.asked-by`), "bootstrap") {
		t.Errorf("the action page does not show the description as Markdown and who asked: %s", a.text(`main`))
	}
	c := answerCases()[0]
	eval[bool](a, fillJS(actForm, c.wrong))
	eval[bool](a, `(document.querySelector(`+jsq(actForm)+`).noValidate = true, true)`)
	a.click(actForm + ` button[value=respond]`)
	a.waitJS(`document.querySelector('#act-error') && document.querySelector('[data-error-for="regions"]')`, 20*time.Second)
	for _, field := range c.errors {
		if a.text(actForm+` [data-error-for="`+field+`"]`) == "" {
			t.Errorf("action page: no error beside %s", field)
		}
	}
	if got := eval[string](a, `document.querySelector('[name="answer.reason"]').value`); got != "too short" {
		t.Errorf("action page: reason kept as %q", got)
	}
	if n, _, _ := e.decisionsOf(t, id); n != 0 {
		t.Fatalf("action page: a wrong answer recorded %d decisions", n)
	}
	a.screenshot("act-wrong-390")
	eval[bool](a, fillJS(actForm, c.right))
	a.click(actForm + ` button[value=respond]`)
	a.waitJS(`document.querySelector('main[data-act="done"]')`, 20*time.Second)
	e.storedIs(t, id, "respond", c.stored)
	if n, _, _ := e.decisionsOf(t, id); n != 1 {
		t.Fatalf("action page: %d decisions", n)
	}
	if errs := unexpected(console()); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// unexpected drops the console's report of the 422s the tests provoke.
func unexpected(errs []string) []string {
	var out []string
	for _, e := range errs {
		if !strings.Contains(e, "status of 422") {
			out = append(out, e)
		}
	}
	return out
}

// hostile is text that runs script wherever it is not escaped.
const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">`

// TestRequestOnTheDesk (issue 23, item 4): a request in the inbox with its
// kind and who asked through what, its description's preview as plain
// text (no Markdown syntax, no link target, no raw HTML); on its task page
// who asked, the description as sanitised Markdown, the payload as
// formatted JSON (hostile text in all of them shown as text, never run),
// and the payload's edit form, whose JSON the browser checks as it is
// typed (the parse error and where, beside the field, and no submit while
// it stands), which the server refuses all the same when the browser's
// check is bypassed (saying where), and which stores the edited payload as
// a JSON object. Once answered, the description in the question thread is
// the same sanitised Markdown.
func TestRequestOnTheDesk(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	b := e.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(1366, 900))
	console := b.watchConsole()
	id := e.createRequest(t, map[string]any{"kind": "tool_call", "title": "Run it? " + hostile,
		"description": "# Run the shell tool\n\n**Why**: cleanup `tmp`.\n\n" + hostile + "\n\n[docs](javascript:window.__pwned=1) and [site](https://example.com/x)",
		"payload":     map[string]any{"tool": "shell", "args": map[string]any{"cmd": "</script>" + hostile, "n": 2}},
		"actions":     []string{"approve", "reject", "edit"}})

	b.Navigate(e.base + "/inbox")
	item := `.inbox-item[data-kind="tool_call"]`
	b.waitJS(`document.querySelector(`+jsq(item)+`)`, 20*time.Second)
	if got := b.text(item + ` [data-requester]`); !strings.Contains(got, "asked by bootstrap through the API") {
		t.Errorf("inbox: requester %q", got)
	}
	if !strings.Contains(b.text(item+` .inbox-title`), hostile) {
		t.Errorf("inbox: the title is not shown as text: %q", b.text(item+` .inbox-title`))
	}
	if got, want := b.text(item+` .question-line`), "Run the shell tool Why: cleanup tmp. docs and site"; got != want {
		t.Errorf("inbox: the description's preview is %q, want %q", got, want)
	}
	if eval[bool](b, `!!window.__pwned`) {
		t.Fatal("hostile text ran as script in the inbox")
	}
	b.screenshot("inbox-1366")

	b.Navigate(e.base + "/tasks/" + id)
	card := pendingSel("tool_call")
	b.waitJS(`document.querySelector(`+jsq(card)+`)`, 20*time.Second)
	if got := b.text(card + ` .asked-by`); !strings.Contains(got, "Asked by bootstrap through the API") {
		t.Errorf("asked by: %q", got)
	}
	if got := b.text(`#task-head [data-via]`); got != "through the API" {
		t.Errorf("task head via: %q", got)
	}
	desc := card + ` .request-description`
	if b.text(desc+` h1`) != "Run the shell tool" || b.text(desc+` strong`) != "Why" || b.text(desc+` code`) != "tmp" {
		t.Errorf("description not rendered as Markdown: %s", eval[string](b, `document.querySelector(`+jsq(desc)+`).innerHTML`))
	}
	if n := b.Count(desc + ` script, ` + desc + ` img[onerror], ` + desc + ` a[href^="javascript"]`); n != 0 {
		t.Errorf("description: %d unsafe elements: %s", n, eval[string](b, `document.querySelector(`+jsq(desc)+`).innerHTML`))
	}
	if got := eval[string](b, `document.querySelector(`+jsq(desc+` a[href^="https"]`)+`).rel`); !strings.Contains(got, "noreferrer") {
		t.Errorf("external link rel %q", got)
	}
	payload := b.text(card + ` .doc-code`)
	if !strings.Contains(payload, `"cmd": "</script>`+strings.ReplaceAll(hostile, `"`, `\"`)) {
		t.Errorf("payload not shown as formatted JSON text: %q", payload)
	}
	if !strings.Contains(payload, "\n  \"args\": {") {
		t.Errorf("payload not indented: %q", payload)
	}
	if eval[bool](b, `!!window.__pwned`) {
		t.Fatal("hostile text ran as script")
	}
	b.screenshot("request-1366")
	b.do(chromedp.EmulateViewport(390, 844))
	b.screenshot("request-390")
	b.do(chromedp.EmulateViewport(1366, 900))

	// The payload's edit form: the browser checks the JSON as it is
	// typed, says where it fails beside the field, and does not send it.
	edit := card + ` form.edit`
	area := edit + ` textarea[name=value]`
	check := edit + ` [data-json-error-for="edit-value"]`
	b.click(card + ` details.decide-edit summary`)
	if !b.Exists(check) || !eval[bool](b, `document.querySelector(`+jsq(check)+`).hidden`) {
		t.Fatalf("no hidden JSON check beside the edit field: %s", b.text(edit))
	}
	b.SetValue(area, "{\n  \"tool\": \"shell\",\n  \"args\": }")
	if got := b.text(check); !strings.Contains(got, "Not JSON at line 3, column 11") || eval[bool](b, `document.querySelector(`+jsq(check)+`).hidden`) {
		t.Errorf("the browser's JSON check says %q before the submit: want where it fails, shown", got)
	}
	if eval[string](b, `document.querySelector(`+jsq(area)+`).getAttribute("aria-invalid")`) != "true" {
		t.Error("the edit field is not marked invalid")
	}
	b.screenshot("edit-json-check-1366")
	// Not sent, even with the browser's own checks off.
	eval[bool](b, `(document.querySelector(`+jsq(edit)+`).noValidate = true, true)`)
	b.click(edit + ` button[value=edit]`)
	time.Sleep(300 * time.Millisecond)
	if b.Exists(`#edit-value-error`) || !strings.Contains(b.text(check), "line 3") {
		t.Errorf("a payload that is not JSON was sent: %s", b.text(edit))
	}
	if n, _, _ := e.decisionsOf(t, id); n != 0 {
		t.Fatalf("a bad edit recorded %d decisions", n)
	}
	b.SetValue(area, `["not", "an object"]`)
	if got := b.text(check); !strings.Contains(got, "not an object") {
		t.Errorf("the browser's check of an array: %q", got)
	}
	b.SetValue(area, `{"tool": "shell"}`)
	if got := b.text(check); got != "" || !eval[bool](b, `document.querySelector(`+jsq(check)+`).hidden`) {
		t.Errorf("the browser's check of an object says %q", got)
	}

	// The server checks all the same: a post that bypasses the browser's
	// check (as a hand-made one would) is refused with where it fails,
	// the input kept, nothing recorded.
	eval[bool](b, `(document.querySelector(`+jsq(area)+`).removeAttribute("data-json"), true)`)
	b.SetValue(area, "{\n  \"tool\": \"shell\",\n  \"args\": }")
	b.click(edit + ` button[value=edit]`)
	b.waitJS(`document.querySelector('#edit-value-error')`, 20*time.Second)
	if got := b.text(`#edit-value-error`); !strings.Contains(got, "line 3, column 11") {
		t.Errorf("the server's edit error %q: want where the JSON fails", got)
	}
	if got := eval[string](b, `document.querySelector(`+jsq(area)+`).value`); !strings.Contains(got, `"args": }`) {
		t.Errorf("edit input not kept: %q", got)
	}
	if n, _, _ := e.decisionsOf(t, id); n != 0 {
		t.Fatalf("a bad edit recorded %d decisions", n)
	}
	b.screenshot("edit-wrong-1366")
	// The page came back with the check on: typing replaces the server's
	// message with the browser's.
	b.SetValue(area, `["not", "an object"]`)
	if b.Exists(`#edit-value-error`) || !strings.Contains(b.text(check), "not an object") {
		t.Errorf("after the server's answer, the browser's check: %q (server's still shown: %v)", b.text(check), b.Exists(`#edit-value-error`))
	}
	b.SetValue(area, `{"tool": "shell", "args": {"cmd": "ls /tmp", "n": 1}}`)
	b.click(edit + ` button[value=edit]`)
	b.waitJS(`document.querySelector('#interrupt .outcome[data-action="edit"]')`, 20*time.Second)
	e.storedIs(t, id, "edit", `{"tool":"shell","args":{"cmd":"ls /tmp","n":1}}`)

	// Answered: the description in the question thread is the open
	// card's sanitised Markdown.
	b.Navigate(e.base + "/tasks/" + id)
	msg := `#interrupt .thread .msg-text.doc-markdown`
	b.waitJS(`document.querySelector(`+jsq(msg)+`)`, 20*time.Second)
	if b.text(msg+` h1`) != "Run the shell tool" || b.text(msg+` strong`) != "Why" || b.text(msg+` code`) != "tmp" {
		t.Errorf("the thread's description is not rendered as Markdown: %s", eval[string](b, `document.querySelector(`+jsq(msg)+`).innerHTML`))
	}
	if n := b.Count(msg + ` script, ` + msg + ` img[onerror], ` + msg + ` a[href^="javascript"]`); n != 0 {
		t.Errorf("thread: %d unsafe elements: %s", n, eval[string](b, `document.querySelector(`+jsq(msg)+`).innerHTML`))
	}
	b.screenshot("answered-thread-1366")
	if eval[bool](b, `!!window.__pwned`) {
		t.Fatal("hostile text ran as script")
	}
	if errs := unexpected(console()); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
