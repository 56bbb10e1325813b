package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// Browser tests of the approval desk: headless Chromium against a whole
// replica (real server, PostgreSQL, hub, runner) with the stub executor.

// pendingSel matches the open decision form of an interrupt kind.
func pendingSel(kind string) string { return `#interrupt article.pending[data-kind=` + kind + `]` }

// decide fills and submits the open form as the tab's user: approve, or
// reject with feedback.
func (b *tab) decide(kind, action, feedback string) {
	b.T.Helper()
	sel := pendingSel(kind)
	b.waitJS(`document.querySelector(`+jsq(sel)+`)`, 20*time.Second)
	if feedback != "" {
		b.do(chromedp.SetValue(chromedp.CSS(sel+` textarea[name=feedback]`), feedback))
	}
	b.click(sel + ` button[name=action][value=` + action + `]`)
}

// TestDeskFeatureWalk starts a feature task from the form with every gate
// waiting, finds the PRD in the inbox, rejects it, watches requirements run
// again as iteration 2 and the changes since the rejection, then approves
// the PRD, the plan and the merge until the task succeeds — one page load
// for the whole decision flow.
func TestDeskFeatureWalk(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	// Ada starts the task and approves its merge herself: this walk runs
	// without separation of duties (TestDeskSeparationOfDuties has it).
	env.stopServer()
	env.policy = auth.NewPolicy(nil, nil)
	env.startServer()
	release := env.exec.hold("feature.requirements", 2)
	defer release()
	b := env.openTab(t, "ada")

	b.do(chromedp.Navigate(env.base + "/tasks/new"))
	b.waitJS(`document.querySelector("form#new-task textarea[name='input.description']")`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#new-task input[name^='gate.']:checked").length`); n != 3 {
		t.Fatalf("gate switches on by default: %d, want 3", n)
	}
	b.do(chromedp.SetValue(chromedp.CSS(`textarea[name="input.description"]`), featuretest.DefaultDescription),
		chromedp.SetValue(chromedp.CSS(`input[name="title"]`), "Export reports as CSV"))
	b.screenshot("new-task-form")
	b.click(`#new-task button[type=submit]`)
	b.waitJS(`location.pathname.startsWith("/tasks/") && document.querySelector("main[data-task]")`, 10*time.Second)
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "waiting" && document.querySelector(`+jsq(pendingSel("prd"))+`)`, 20*time.Second)
	b.screenshot("prd-waiting")

	b.do(chromedp.Navigate(env.base + "/inbox"))
	b.waitJS(`document.querySelector(".inbox-item[data-kind=prd]")`, 10*time.Second)
	if got := b.text(".inbox-item[data-kind=prd]"); !strings.Contains(got, "Export reports as CSV") {
		t.Fatalf("inbox entry without the task's title: %q", got)
	}
	b.screenshot("inbox")
	b.click(`.inbox-item[data-kind=prd] a`)
	b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 10*time.Second)
	b.liveOpen()
	eval[bool](b, `(window.__samePage = true)`)
	eval[bool](b, `(window.__csp = [], document.addEventListener("securitypolicyviolation", function(e){window.__csp.push(e.violatedDirective+" "+e.blockedURI)}), true)`)

	// A rejection without feedback never leaves the browser.
	b.click(pendingSel("prd") + ` button[name=action][value=reject]`)
	time.Sleep(300 * time.Millisecond)
	if !eval[bool](b, `document.querySelector(`+jsq(pendingSel("prd")+` textarea[name=feedback]`)+`).validity.valueMissing`) {
		t.Fatal("the feedback field is not required for a rejection")
	}
	var n int
	if err := env.pool.QueryRow(t.Context(), `SELECT count(*) FROM decisions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("decisions after an empty rejection: %d (%v)", n, err)
	}

	const feedback = "Add an acceptance criterion for exports over 10,000 rows."
	b.decide("prd", "reject", feedback)
	b.waitJS(`document.querySelector('[data-node=requirements][data-status=running][data-iteration="2"]')`, 15*time.Second)
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "running"`, 5*time.Second)
	if got := b.text("#timeline"); !strings.Contains(got, "Started requirements again (iteration 2)") {
		t.Fatalf("timeline without the re-run: %q", got)
	}
	if got := b.text("#interrupt .outcome"); !strings.Contains(got, "rejected by ada") {
		t.Fatalf("outcome after reject: %q", got)
	}
	b.screenshot("requirements-iteration-2-running")
	release()

	b.waitJS(`document.querySelector(`+jsq(pendingSel("prd")+` .changes .diff-table tr.add`)+`)`, 20*time.Second)
	if got := b.text(pendingSel("prd") + " .changes"); !strings.Contains(got, feedback) {
		t.Fatalf("changes since the rejection do not show the feedback: %q", got)
	}
	if got := b.text(`[data-node=requirements]`); !strings.Contains(got, "×2") {
		t.Fatalf("requirements node does not count 2 runs: %q", got)
	}
	b.screenshot("prd-iteration-2-changes")
	// The artifact viewer followed without a reload: it names the new
	// version under decision, not the one rejected.
	b.waitJS(`(function(){ var v = document.querySelector("#artifact-view.follows-latest[data-artifact='spec.yaml']");
		var last = [].slice.call(document.querySelectorAll('#artifacts-index li[data-artifact="spec.yaml"] [data-version]')).pop();
		return v && last && v.dataset.version === last.dataset.version && v.dataset.version !== "2" })()`, 10*time.Second)
	if got := b.text("#artifact-view"); !strings.Contains(got, "is the document under decision") {
		t.Fatalf("the default artifact view does not point at the document under decision: %q", got)
	}

	// The artifacts section compares versions too (an htmx swap).
	latest := eval[string](b, `[].slice.call(document.querySelectorAll('#artifacts-index li[data-artifact="spec.yaml"] [data-version]')).pop().dataset.version`)
	b.click(`#artifacts-index li[data-artifact="spec.yaml"] [data-version="` + latest + `"]`)
	b.waitJS(`document.querySelector('#artifact-view:not(.follows-latest)[data-version="`+latest+`"][data-from="0"] a[href*="from="]')`, 10*time.Second)
	b.click(`#artifact-view a[href*='from=']`)
	b.waitJS(`document.querySelector('#artifact-view[data-version="`+latest+`"]:not([data-from="0"]) .diff-table tr.add')`, 10*time.Second)
	if got := b.text("#artifact-view .diff-table"); !strings.Contains(got, feedback) {
		t.Fatalf("artifact diff does not show the feedback: %q", got)
	}
	b.screenshot("artifact-diff")

	b.decide("prd", "approve", "")
	b.waitJS(`document.querySelector(`+jsq(pendingSel("plan"))+`)`, 20*time.Second)
	b.screenshot("plan-waiting")
	b.decide("plan", "approve", "")
	b.waitJS(`document.querySelector(`+jsq(pendingSel("merge"))+`)`, 20*time.Second)
	b.decide("merge", "approve", "")
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 20*time.Second)
	b.waitJS(`document.querySelector('[data-node=merge][data-status=done]')`, 5*time.Second)
	if !eval[bool](b, `window.__samePage === true`) {
		t.Fatal("the page reloaded")
	}
	if v := eval[string](b, `window.__csp.join("; ")`); v != "" {
		t.Errorf("content security policy violations: %s", v)
	}
	for _, n := range []string{"analyze", "requirements", "plan", "implement", "merge"} {
		if st := eval[string](b, `document.querySelector('[data-node=`+n+`]').dataset.status`); st != "done" {
			t.Errorf("node %s status %q, want done", n, st)
		}
	}
	if got := b.text("#decisions"); strings.Count(got, "by ada") != 4 {
		t.Errorf("decisions list: %q", got)
	}
	b.screenshot("succeeded")
}

// TestDeskTwoReviewers: two browsers on one gate. One approves; the
// other's form turns into "approved by …" live, without a reload; a late
// submit from a page that missed the news shows that decision, not an
// error.
func TestDeskTwoReviewers(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	id := env.createFeature("Two reviewers")
	env.waitPending(id, "prd")
	alice, bob := env.openTab(t, "alice"), env.openTab(t, "bob")
	for _, b := range []*tab{alice, bob} {
		b.do(chromedp.Navigate(env.base + "/tasks/" + id))
		b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 10*time.Second)
		b.liveOpen()
	}
	bob.do(chromedp.SetValue(chromedp.CSS(pendingSel("prd")+" textarea[name=feedback]"), "half-typed thought"))

	alice.decide("prd", "approve", "")
	start := time.Now()
	bob.waitJS(`(function(){var o=document.querySelector("#interrupt .outcome[data-action=approve]");return o&&o.textContent.indexOf("approved by alice")>=0})()`, 15*time.Second)
	t.Logf("bob saw alice's decision %v after her click", time.Since(start))
	bob.screenshot("sees-approved-by-alice")

	// The plan gate arrives on both pages. Bob's page loses its live feed
	// (its socket closes with the element), so his form goes stale.
	for _, b := range []*tab{alice, bob} {
		b.waitJS(`document.querySelector(`+jsq(pendingSel("plan"))+`)`, 20*time.Second)
	}
	eval[bool](bob, `(document.getElementById("live").remove(), true)`)
	alice.decide("plan", "approve", "")
	alice.waitJS(`document.querySelector(`+jsq(pendingSel("merge"))+`)`, 20*time.Second)
	if bob.text(pendingSel("plan")) == "" {
		t.Fatal("bob's stale plan form is gone; the late submit cannot be tested")
	}
	bob.decide("plan", "approve", "")
	bob.waitJS(`document.querySelector("#interrupt .outcome.late")`, 10*time.Second)
	got := bob.text("#interrupt")
	if !strings.Contains(got, "Someone decided before you") || !strings.Contains(got, "approved by alice") {
		t.Fatalf("late submit shows %q", got)
	}
	if title := eval[string](bob, `document.title`); !strings.Contains(title, "Two reviewers") {
		t.Fatalf("late submit left the page: title %q", title)
	}
	bob.screenshot("late-submit")
}

// TestDeskFeedbackIsText: markup in a title and in feedback is shown as
// text on every page it appears on, and never runs.
func TestDeskFeedbackIsText(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	const evil = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	id := env.createFeature(`Title <img src=x onerror="window.__pwned=3">`)
	env.waitPending(id, "prd")
	b := env.openTab(t, "mallory")
	b.do(chromedp.Navigate(env.base + "/tasks/" + id))
	b.liveOpen()
	b.decide("prd", "reject", evil)
	b.waitJS(`document.querySelector(`+jsq(pendingSel("prd")+` .changes`)+`)`, 20*time.Second)

	noPwn := func(where string) {
		t.Helper()
		if v := eval[string](b, `typeof window.__pwned`); v != "undefined" {
			t.Fatalf("%s: window.__pwned is %s", where, v)
		}
		if n := eval[int](b, `document.querySelectorAll("img[src=x], main script").length`); n != 0 {
			t.Fatalf("%s: %d injected elements", where, n)
		}
	}
	noPwn("task page, live")
	// The decision answers the form and travels to the page live; the
	// next interrupt may come first (the decision hands the task to a
	// worker at once), so each part is waited for.
	for _, sel := range []string{"#decisions .feedback-text", "#interrupt .outcome .feedback-text", "#timeline .quote",
		pendingSel("prd") + " .changes"} {
		b.waitJS(`[].some.call(document.querySelectorAll(`+jsq(sel)+`), function(e){ return e.textContent.indexOf(`+
			jsq("<script>window.__pwned=1</script>")+`) >= 0 })`, 10*time.Second)
	}
	noPwn("task page, live, decision shown")
	b.screenshot("task")
	b.do(chromedp.Reload())
	b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 10*time.Second)
	noPwn("task page, reloaded")
	for _, sel := range []string{"#state-body", "#timeline .ev-detail", pendingSel("prd") + " .changes", "#decisions"} {
		if got := b.texts(sel); !strings.Contains(got, "<script>window.__pwned=1</script>") {
			t.Errorf("%s (reloaded) does not show the feedback as text", sel)
		}
	}
	if got := b.text("h1"); !strings.Contains(got, `<img src=x onerror="window.__pwned=3">`) {
		t.Errorf("title not shown as text: %q", got)
	}
	for _, page := range []string{"/", "/inbox"} {
		b.do(chromedp.Navigate(env.base + page))
		b.waitJS(`document.readyState === "complete"`, 10*time.Second)
		noPwn(page)
		if got := b.text("main"); !strings.Contains(got, `onerror="window.__pwned=3"`) {
			t.Errorf("%s does not show the title as text", page)
		}
	}
	b.screenshot("inbox")
}

// TestDeskReconnect: the server stops while a task page is open and moves
// on without it; once the server is back, the page reconnects and shows
// every event it missed, without a reload.
func TestDeskReconnect(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	id := env.createFeature("Reconnect")
	prd := env.waitPending(id, "prd")
	b := env.openTab(t, "reconnect")
	b.do(chromedp.Navigate(env.base + "/tasks/" + id))
	b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 10*time.Second)
	b.liveOpen()
	eval[bool](b, `(window.__samePage = true)`)
	before := eval[int](b, `document.querySelectorAll("#timeline li").length`)

	env.stopServer()
	b.waitJS(`document.getElementById("live-state").dataset.state !== "open"`, 5*time.Second)
	b.screenshot("server-down")
	// The task moves on while the page cannot hear it.
	if _, err := env.engine.Decide(t.Context(), id, decisionInput(prd.ID, "approve", "carol")); err != nil {
		t.Fatalf("decide: %v", err)
	}
	env.runner.Wake()
	env.waitPending(id, "plan")
	env.startServer()

	b.waitJS(`document.querySelector(`+jsq(pendingSel("plan"))+`)`, 20*time.Second)
	b.waitJS(`document.querySelector('[data-node=plan][data-status=waiting]') && document.querySelector('[data-node=research][data-status=done]')`, 5*time.Second)
	after := eval[int](b, `document.querySelectorAll("#timeline li").length`)
	if after <= before {
		t.Fatalf("timeline has %d entries after the reconnect, %d before", after, before)
	}
	timeline := b.text("#timeline")
	for _, want := range []string{"Approved", "Completed research", "Waiting: Approve the implementation plan"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline misses %q", want)
		}
	}
	// Every seq once, in order: nothing missed, nothing twice.
	if ok := eval[bool](b, `(function(){var s=[].map.call(document.querySelectorAll("#timeline li"),function(l){return +l.dataset.seq});for(var i=1;i<s.length;i++){if(s[i]!==s[i-1]+1)return false}return s[0]===1})()`); !ok {
		t.Errorf("timeline seqs are not 1..n: %s", eval[string](b, `[].map.call(document.querySelectorAll("#timeline li"),function(l){return l.dataset.seq}).join(",")`))
	}
	if !eval[bool](b, `window.__samePage === true`) {
		t.Fatal("the page reloaded")
	}
	b.screenshot("caught-up")
}

// TestDeskNewTaskInvalid: the server refuses the form's input; the errors
// sit next to their fields and nothing typed is lost.
func TestDeskNewTaskInvalid(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	b := env.openTab(t, "form")
	b.do(chromedp.Navigate(env.base + "/tasks/new"))
	b.waitJS(`document.querySelector("form#new-task")`, 10*time.Second)
	// Spaces pass the browser's required check; the server refuses them.
	b.do(chromedp.SetValue(chromedp.CSS(`textarea[name="input.description"]`), "   "),
		chromedp.SetValue(chromedp.CSS(`input[name="input.name"]`), "keep-this-name"),
		chromedp.SetValue(chromedp.CSS(`input[name="title"]`), "Keep this title"))
	eval[bool](b, `(document.querySelector("input[name='gate.allowPlan']").checked = false, true)`)
	b.click(`#new-task button[type=submit]`)
	b.waitJS(`document.querySelector("[data-field='input.description'] .field-error")`, 10*time.Second)
	if got := b.text("[data-field='input.description'] .field-error"); !strings.Contains(got, "required") {
		t.Errorf("description error: %q", got)
	}
	checks := map[string]string{
		`document.querySelector("input[name='input.name']").value`:                                  "keep-this-name",
		`document.querySelector("input[name='title']").value`:                                       "Keep this title",
		`document.querySelector("textarea[name='input.description']").getAttribute("aria-invalid")`: "true",
		`String(document.querySelector("input[name='gate.allowPlan']").checked)`:                    "false",
		`String(document.querySelector("input[name='gate.allowPrd']").checked)`:                     "true",
		`location.pathname`: "/tasks/new",
	}
	for expr, want := range checks {
		if got := eval[string](b, expr); got != want {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
	var n int
	if err := env.pool.QueryRow(t.Context(), "SELECT count(*) FROM tasks").Scan(&n); err != nil || n != 0 {
		t.Errorf("tasks after a refused form: %d (%v)", n, err)
	}
	b.screenshot("errors")
}

// TestDeskDashboardLive: the dashboard and the inbox follow tasks as they
// move, without a reload.
func TestDeskDashboardLive(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	dash, inbox := env.openTab(t, "dashboard"), env.openTab(t, "inbox")
	consoleErrors := dash.watchConsole()
	dash.do(chromedp.Navigate(env.base + "/"))
	inbox.do(chromedp.Navigate(env.base + "/inbox"))
	dash.liveOpen()
	inbox.liveOpen()
	eval[bool](dash, `(window.__samePage = true)`)

	id := env.createFeature("Shown live")
	dash.waitJS(`document.querySelector('[data-group=waiting] [data-task="`+id+`"]')`, 10*time.Second)
	if got := dash.text(`[data-task="` + id + `"]`); !strings.Contains(got, "Approve the PRD") {
		t.Errorf("waiting task does not say what it waits for: %q", got)
	}
	dash.waitJS(`document.querySelector("#nav-inbox-count").textContent === "1"`, 5*time.Second)
	inbox.waitJS(`document.querySelector(".inbox-item[data-kind=prd]")`, 10*time.Second)
	dash.screenshot("waiting")

	itr := env.waitPending(id, "prd")
	if _, err := env.engine.Decide(t.Context(), id, decisionInput(itr.ID, "approve", "dora")); err != nil {
		t.Fatal(err)
	}
	env.runner.Wake()
	inbox.waitJS(`document.querySelector(".inbox-item[data-kind=plan]") && !document.querySelector(".inbox-item[data-kind=prd]")`, 10*time.Second)
	inbox.screenshot("plan")
	if !eval[bool](dash, `window.__samePage === true`) {
		t.Fatal("the dashboard reloaded")
	}

	// Small screens: one column, nothing wider than the viewport.
	dash.do(chromedp.EmulateViewport(390, 844))
	dash.do(chromedp.Navigate(env.base + "/tasks/" + id))
	dash.waitJS(`document.querySelector(`+jsq(pendingSel("plan"))+`)`, 10*time.Second)
	if w := eval[int](dash, `document.documentElement.scrollWidth`); w > 400 {
		t.Errorf("task page is %dpx wide on a 390px screen; widest: %s", w, eval[string](dash,
			`[].slice.call(document.querySelectorAll("body *")).filter(function(e){return e.getBoundingClientRect().right>400}).slice(0,5).map(function(e){return e.tagName+"."+e.className}).join(", ")`))
	}
	dash.screenshot("phone-task")
	// Under the content security policy nothing was refused, nothing threw.
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestDeskPickWorkflow: choosing another workflow swaps in its form.
func TestDeskPickWorkflow(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner(askWorkflow(t)))
	b := env.openTab(t, "quinn")
	b.do(chromedp.Navigate(env.base + "/tasks/new"))
	b.waitJS(`document.querySelector("textarea[name='input.description']")`, 10*time.Second)
	eval[bool](b, `(function(){var s=document.getElementById("workflow-pick");s.value="ask";s.dispatchEvent(new Event("change",{bubbles:true}));return true})()`)
	b.waitJS(`location.search.indexOf("workflow=ask") >= 0 && document.querySelector("#new-task input[name=workflow][value=ask]")`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#new-task [name^='input.'], #new-task [name^='gate.']").length`); n != 0 {
		t.Fatalf("the ask workflow's form has %d inputs, want none", n)
	}
	b.click(`#new-task button[type=submit]`)
	b.waitJS(`document.querySelector("main[data-task]") && document.querySelector("#interrupt article.pending[data-kind=question]")`, 15*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS("#answer"), "About 5,000 euros"))
	b.click(`#interrupt button[name=action][value=respond]`)
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 15*time.Second)
	if got := b.text("#interrupt"); !strings.Contains(got, "answered by quinn") {
		t.Fatalf("outcome: %q", got)
	}
	b.screenshot("answered")
}
