package web

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
)

// Browser tests of the first hour, round 2 (issue 27): what only Chromium
// shows — its Origin under Referrer-Policy: no-referrer, our CSP, the
// viewport.

// TestActionLinkDecidesInChromium: an email's action link opened and
// clicked in Chromium decides. Its page sends Referrer-Policy: no-referrer,
// so Chromium posts the form with Origin: null; the token and the form's
// token-bound field are the check there, not the Origin. Feedback typed
// on the page is recorded with the rejection.
func TestActionLinkDecidesInChromium(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ctx := context.Background()
	e.user("alice", auth.RoleApprover)
	e.user("carol", auth.RoleApprover)
	id := e.createAs(t, "carol", "Clicked <in> Chromium", `{}`)
	itr := e.waitPending(id, "prd")
	token, hash := notify.ActionToken()
	if err := e.store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: itr.ID, TaskID: id, Recipient: "alice",
		ExpiresAt: time.Now().Add(time.Hour)}, ""); err != nil {
		t.Fatal(err)
	}
	b := openTab(t, "mail-reader") // no session: the link is the credential
	console := b.watchConsole()
	b.do(chromedp.Navigate(e.base + "/act/" + token))
	b.waitJS(`document.querySelector("form button[name=action][value=reject]")`, 10*time.Second)
	b.screenshot("act-page")
	b.do(chromedp.SetValue(chromedp.CSS(`textarea[name=feedback]`), "Name the export's columns"))
	b.click(`form button[name=action][value=reject]`)
	b.waitJS(`document.querySelector("h1") && /Decided/.test(document.querySelector("h1").textContent)`, 10*time.Second)
	b.screenshot("act-decided")
	if got := b.text("main"); !strings.Contains(got, "alice rejected this") {
		t.Errorf("decided page says %q", got)
	}
	cur, err := e.store.Interrupt(ctx, itr.ID)
	if err != nil || cur.Status != graph.InterruptResolved {
		t.Fatalf("interrupt after the click: %+v %v", cur, err)
	}
	ds, err := e.store.Decisions(ctx, id)
	if err != nil || len(ds) != 1 || ds[0].DecidedBy != "alice" || ds[0].Feedback != "Name the export's columns" {
		t.Errorf("decisions %+v %v", ds, err)
	}
	if msgs := console(); len(msgs) > 0 {
		t.Errorf("console errors: %q", msgs)
	}
}

// noInlineHandlers is a page check: no element carries an on… attribute
// (our CSP blocks them: they would do nothing).
const noInlineHandlers = `[].concat.apply([], [].map.call(document.querySelectorAll("*"), function(e){` +
	`return [].filter.call(e.attributes, function(a){return /^on/i.test(a.name)}).map(function(a){return e.tagName+" "+a.name})}))`

// TestDeskForkPickerAndCSP: the fork page's checkpoint picker changes the
// checkpoint in Chromium (the select submits its form from app.js, and a
// button does it too); the select fits its card at 1366 and 390 px. Every
// desk page is then opened with the console watched: a CSP violation
// (inline handler, inline style or script) or any other console error
// fails the test, and no element carries an inline handler.
func TestDeskForkPickerAndCSP(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	ctx := context.Background()
	src := env.createFeature("Export reports as CSV")
	itr := env.waitPending(src, "prd")
	hist, err := env.store.History(ctx, src)
	if err != nil || len(hist) < 3 {
		t.Fatalf("history %+v %v", hist, err)
	}
	b := env.openTab(t, "ada")
	console := b.watchConsole()
	b.do(chromedp.EmulateViewport(1366, 900))
	last := hist[len(hist)-1].Step
	b.do(chromedp.Navigate(env.base + "/tasks/" + src + "/fork?step=" + strconv.Itoa(last)))
	b.waitJS(`document.querySelector("#fork-step")`, 10*time.Second)
	first := hist[0].Step
	if first == last {
		t.Fatalf("one checkpoint only: %+v", hist)
	}
	b.screenshot("fork-1366")
	// Pick the first checkpoint as a person would: the page follows.
	eval[bool](b, `(function(){var s=document.querySelector("#fork-step");s.value=`+jsq(strconv.Itoa(first))+
		`;s.dispatchEvent(new Event("change",{bubbles:true}));return true})()`)
	b.waitJS(`document.querySelector("main.fork-page") && document.querySelector("main.fork-page").dataset.step === `+jsq(strconv.Itoa(first)), 10*time.Second)
	// The form has a button too.
	if !b.Exists(`form[aria-label="Choose a checkpoint"] button[type=submit]`) {
		t.Error("the checkpoint form has no button")
	}
	fits := `(function(){var s=document.querySelector("#fork-step"),c=s.closest(".card");` +
		`return s.getBoundingClientRect().right <= c.getBoundingClientRect().right + 0.5})()`
	if !eval[bool](b, fits) {
		t.Error("the checkpoint select overflows its card at 1366 px")
	}
	b.do(chromedp.EmulateViewport(390, 844))
	b.do(chromedp.Reload())
	b.waitJS(`document.querySelector("#fork-step")`, 10*time.Second)
	if !eval[bool](b, fits) {
		t.Error("the checkpoint select overflows its card at 390 px")
	}
	b.screenshot("fork-390")
	b.do(chromedp.EmulateViewport(1366, 900))

	// Every page, watched.
	token, hash := notify.ActionToken()
	if err := env.store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: itr.ID, TaskID: src, Recipient: "ada",
		ExpiresAt: time.Now().Add(time.Hour)}, ""); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/inbox", "/tasks/new", "/tasks/" + src, "/tasks/" + src + "/fork",
		"/analytics", "/audit", "/admin/users", "/admin/tokens", "/admin/policy", "/admin/webhooks", "/account",
		"/act/" + token} {
		b.do(chromedp.Navigate(env.base + path))
		b.waitJS(`document.readyState === "complete"`, 10*time.Second)
		time.Sleep(200 * time.Millisecond) // late console reports
		if got := eval[[]string](b, noInlineHandlers); len(got) > 0 {
			t.Errorf("%s: inline handlers %q", path, got)
		}
	}
	if msgs := console(); len(msgs) > 0 {
		t.Errorf("console errors (CSP violations among them): %q", msgs)
	}
}
