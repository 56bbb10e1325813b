package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestHostileTextNewTaskFormBrowser: in Chromium, the new-task form of a
// workflow with file attachments (sent as multipart) with a NUL in its
// text comes back with the message beside that field, the title and the
// text kept (the NUL shown as U+FFFD), a word that the chosen file must be
// attached again, and no task started. Before, it was an error page and
// everything typed was lost.
func TestHostileTextNewTaskFormBrowser(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner(filesWorkflow(t)))
	file := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\nhello"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := env.openTab(t, "hostile")
	b.do(chromedp.Navigate(env.base + "/tasks/new?workflow=files"))
	b.waitJS(`document.querySelector("form#new-task[enctype='multipart/form-data']")`, 10*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS(`input[name="title"]`), "Quarterly notes"),
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="input.files"]`), []string{file}))
	// No keyboard types a NUL; a paste or a script can.
	eval[bool](b, `(document.querySelector("textarea[name='input.query']").value = "Summarise\u0000 these notes", true)`)
	b.click(`#new-task button[type=submit]`)
	b.waitJS(`document.querySelector("[data-field='input.query'] .field-error")`, 10*time.Second)
	if got := b.text("[data-field='input.query'] .field-error"); !strings.Contains(got, "NUL character") {
		t.Errorf("the message beside the query: %q", got)
	}
	checks := map[string]string{
		`document.querySelector("textarea[name='input.query']").value`:                        "Summarise\uFFFD these notes",
		`document.querySelector("input[name='title']").value`:                                 "Quarterly notes",
		`document.querySelector("textarea[name='input.query']").getAttribute("aria-invalid")`: "true",
		`location.pathname`: "/tasks/new",
		`String(/attach them again/.test(document.querySelector("#form-error").textContent))`: "true",
	}
	for expr, want := range checks {
		if got := eval[string](b, expr); got != want {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
	if n := env.count(t, "tasks"); n != 0 {
		t.Errorf("%d tasks started by a refused form", n)
	}
	b.screenshot("refused")
}

// TestHostileTextForkAndLinkBrowser: on the fork page in Chromium, a merge patch
// typed with the escape \u0000 (a NUL once parsed) comes back with the
// message beside the patch, the patch and the title kept, and no fork;
// the action link's page, posted with a NUL in its feedback, comes back
// with the message and the feedback kept (U+FFFD where the NUL was).
// Before, the patch was a 500 and the feedback an error page.
func TestHostileTextForkAndLinkBrowser(t *testing.T) {
	t.Parallel()
	env := setup(t, mailOpts())
	smtp := env.approverByMail(t, "alice")
	id := env.createAs(t, "carol", "Hostile pages", `{}`)
	env.waitPending(id, "prd")
	fp := env.fingerprint(t)
	b := env.openTab(t, "ada")
	b.do(chromedp.Navigate(env.base + "/tasks/" + id + "/fork?step=0"))
	b.waitJS(`document.querySelector("#fork-form #fork-patch")`, 10*time.Second)
	const patch = `{"description": "Let users\u0000 export"}`
	b.do(chromedp.SetValue(chromedp.CSS(`#fork-title`), "Kept title"))
	eval[bool](b, `(document.querySelector("#fork-patch").value = `+jsq(patch)+`, true)`)
	b.click(`#fork-form button[type=submit]`)
	b.waitJS(`document.querySelector("details.invalid .field-error")`, 10*time.Second)
	if got := b.text("details.invalid .field-error"); !strings.Contains(got, "description contains a NUL character") {
		t.Errorf("the message beside the patch: %q", got)
	}
	for expr, want := range map[string]string{
		`document.querySelector("#fork-patch").value.trim()`: patch,
		`document.querySelector("#fork-title").value`:        "Kept title",
	} {
		if got := eval[string](b, expr); got != want {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
	b.screenshot("fork-refused")

	link := actLinkOf(t, smtp.Wait(t, 1, 30*time.Second)[0])
	b.do(chromedp.Navigate(env.base + link))
	b.waitJS(`document.querySelector("#act-form #feedback")`, 10*time.Second)
	eval[bool](b, `(document.querySelector("#feedback").value = "Too\u0000 vague", true)`)
	b.click(`#act-form button[name=action][value=reject]`)
	b.waitJS(`document.querySelector("#act-error")`, 10*time.Second)
	if got := b.text("#act-error"); !strings.Contains(got, "feedback contains a NUL character") {
		t.Errorf("the action page's message: %q", got)
	}
	if got := eval[string](b, `document.querySelector("#feedback").value`); got != "Too\uFFFD vague" {
		t.Errorf("the feedback kept: %q", got)
	}
	b.screenshot("act-refused")
	if got := env.fingerprint(t); got != fp {
		t.Errorf("refused forms changed the database: %s → %s", fp, got)
	}
}

// TestHostileTextUsersFormBrowser: in Chromium, the Users page's form to
// add a user with a NUL pasted into the name comes back with the message
// at the top, the name (U+FFFD where the NUL was), role and email kept,
// and no user made.
func TestHostileTextUsersFormBrowser(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	b := env.openTab(t, "admin")
	users := env.count(t, "users")
	b.do(chromedp.Navigate(env.base + "/admin/users"))
	b.waitJS(`document.querySelector("#new-name")`, 10*time.Second)
	eval[bool](b, `(document.querySelector("#new-name").value = "dora\u0000", true)`)
	b.do(chromedp.SetValue(chromedp.CSS(`#new-email`), "dora@example.com"),
		chromedp.SetValue(chromedp.CSS(`#new-password`), "dora-password-1"),
		chromedp.SetValue(chromedp.CSS(`#new-role`), "approver"))
	b.click(`form[action="/admin/users"] button[type=submit]`)
	b.waitJS(`document.querySelector("#admin-error")`, 10*time.Second)
	if got := b.text("#admin-error"); !strings.Contains(got, "username contains a NUL character") {
		t.Errorf("the message: %q", got)
	}
	for expr, want := range map[string]string{
		`document.querySelector("#new-name").value`:  "dora\uFFFD",
		`document.querySelector("#new-email").value`: "dora@example.com",
		`document.querySelector("#new-role").value`:  "approver",
	} {
		if got := eval[string](b, expr); got != want {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
	if n := env.count(t, "users"); n != users {
		t.Errorf("%d users made by a refused form", n-users)
	}
	b.screenshot("users-refused")
}
