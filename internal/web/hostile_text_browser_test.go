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
