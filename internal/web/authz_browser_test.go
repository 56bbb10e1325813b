package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestDeskRolesInTheBrowser: an approver signs in and approves from the
// page; a viewer, signed in on another browser, sees the same task live
// with no decision form at all, and a forged decision post from its page
// (with the page's own CSRF token) is refused and changes nothing.
func TestDeskRolesInTheBrowser(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	env.user("april", auth.RoleApprover)
	env.user("vera", auth.RoleViewer)
	id := env.createFeature("Roles in the browser")
	prd := env.waitPending(id, "prd")

	viewer := env.openTab(t, "vera")
	viewer.do(chromedp.Navigate(env.base + "/tasks/" + id))
	viewer.waitJS(`document.querySelector("#interrupt article.pending[data-kind=prd]")`, 10*time.Second)
	viewer.liveOpen()
	if n := eval[int](viewer, `document.querySelectorAll("#interrupt form, #interrupt button[name=action]").length`); n != 0 {
		t.Fatalf("the viewer's page has %d decision forms or buttons", n)
	}
	if got := viewer.text("#interrupt .notice"); !strings.Contains(got, "deciding needs the approver role") {
		t.Fatalf("the viewer is not told why: %q", got)
	}
	if eval[bool](viewer, `!!document.querySelector("a[href='/tasks/new']")`) {
		t.Error("the viewer is offered to start a task")
	}
	if eval[bool](viewer, `[].some.call(document.querySelectorAll(".task-head-actions form"), function(f){return f.offsetParent !== null})`) {
		t.Error("the viewer sees the cancel button")
	}
	viewer.screenshot("viewer-no-form")

	// A forged post from the viewer's page, with its valid CSRF token.
	before := env.deskFingerprint(t)
	eval[bool](viewer, `(function(){var b=new URLSearchParams({interrupt_id:`+jsq(prd.ID)+`,action:"approve",`+
		`_csrf:document.querySelector("meta[name=csrf-token]").content});`+
		`fetch("/tasks/`+id+`/decide",{method:"POST",body:b,redirect:"manual"}).then(function(r){window.__forged=r.status});return true})()`)
	viewer.waitJS(`window.__forged !== undefined`, 10*time.Second)
	if status := eval[int](viewer, `window.__forged`); status != 403 {
		t.Fatalf("forged decision from the viewer's page: %d, want 403", status)
	}
	if after := env.deskFingerprint(t); after != before {
		t.Fatal("the forged decision changed something")
	}

	approver := env.openTab(t, "april")
	approver.do(chromedp.Navigate(env.base + "/tasks/" + id))
	approver.liveOpen()
	approver.decide("prd", "approve", "")
	approver.waitJS(`(function(){var o=document.querySelector("#interrupt .outcome[data-action=approve]");return o&&o.textContent.indexOf("approved by april")>=0})()`, 10*time.Second)
	approver.screenshot("approved")

	// The viewer's page follows, live: the next gate shows up, still
	// without a form.
	viewer.waitJS(`document.querySelector("#interrupt article.pending[data-kind=plan]")`, 20*time.Second)
	if n := eval[int](viewer, `document.querySelectorAll("#interrupt form").length`); n != 0 {
		t.Fatalf("the viewer's live page got %d decision forms", n)
	}
	approver.waitJS(`document.querySelector("#interrupt article.pending[data-kind=plan] button[name=action][value=approve]")`, 20*time.Second)
	viewer.screenshot("viewer-live-plan")
}
