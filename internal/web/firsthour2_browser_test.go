package web

import (
	"context"
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
	e := newDeskEnv(t)
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
