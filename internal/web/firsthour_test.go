package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// TestTokenCreationRevealsOnce: creating a token answers with a redirect;
// the page it leads to shows the secret, a copy button and an example
// curl once; a reload shows no secret and creates nothing; a second token
// of the same (active) name is refused with a sentence.
func TestTokenCreationRevealsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann")
	status, h, _ := e.postAs(t, &ann, "/admin/tokens", url.Values{"name": {"ci-bot"}, "role": {"viewer"}}, postOpts{})
	if status != http.StatusSeeOther || h.Get("Location") != "/admin/tokens" {
		t.Fatalf("create: %d %q, want a redirect to the tokens page", status, h.Get("Location"))
	}
	_, rh, page := e.follow(t, &ann, h)
	secret := regexp.MustCompile(`id="token-secret">(gatehouse_[A-Za-z0-9_-]+)<`).FindStringSubmatch(page)
	if secret == nil || !strings.Contains(page, `data-copy="token-secret"`) ||
		!strings.Contains(page, "curl -H &#39;Authorization: Bearer "+secret[1]+"&#39; "+e.base+"/api/v1/tasks") {
		t.Fatalf("the reveal lacks the secret, the copy button or the curl:\n%s", page)
	}
	if rh.Get("Cache-Control") != "no-store" {
		t.Errorf("the reveal may be cached: %q", rh.Get("Cache-Control"))
	}
	// A reload (the browser no longer has the reveal cookie, which the
	// page deleted) shows no secret and creates nothing.
	_, _, again := e.getAs(t, &ann, "/admin/tokens", nil)
	if strings.Contains(again, secret[1]) {
		t.Fatal("a reload shows the secret again")
	}
	toks, err := e.auth.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tk := range toks {
		if tk.Name == "ci-bot" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d tokens named ci-bot, want 1", n)
	}
	status, _, body := e.postAs(t, &ann, "/admin/tokens", url.Values{"name": {"ci-bot"}, "role": {"viewer"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "An active token is named ci-bot already.") {
		t.Fatalf("duplicate name: %d", status)
	}
	if !strings.Contains(again, `data-confirm="Revoke token ci-bot?`) {
		t.Error("Revoke does not ask for confirmation")
	}
}

// TestPasswordChangeInTheDesk: a user changes their own password on
// /account (the current one is checked; the two entries must agree), is
// signed out with a message and signs in with the new one; an admin
// resets another user's password on the Users page.
func TestPasswordChangeInTheDesk(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("vic", auth.RoleViewer)
	vic := e.session("vic")
	if status, _, page := e.getAs(t, &vic, "/account", nil); status != http.StatusOK || !strings.Contains(page, `id="password-form"`) {
		t.Fatalf("account page: %d", status)
	}
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"current": {"wrong"}, "password": {"new password 1"}, "repeat": {"new password 1"}}, "Current password: that is not your password."},
		{url.Values{"current": {password("vic")}, "password": {"new password 1"}, "repeat": {"new password 2"}}, "the two entries differ"},
		{url.Values{"current": {password("vic")}, "password": {"short"}, "repeat": {"short"}}, "Password:"},
	} {
		if status, _, body := e.postAs(t, &vic, "/account/password", tc.form, postOpts{}); status != http.StatusUnprocessableEntity ||
			!strings.Contains(body, tc.want) {
			t.Errorf("%v: %d, want 422 saying %q", tc.form, status, tc.want)
		}
	}
	status, h, _ := e.postAs(t, &vic, "/account/password", url.Values{"current": {password("vic")},
		"password": {"a brand new one"}, "repeat": {"a brand new one"}}, postOpts{})
	if status != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Fatalf("change: %d %q", status, h.Get("Location"))
	}
	if _, _, page := e.follow(t, nil, h); !strings.Contains(page, "Your password is changed. Sign in with the new one.") {
		t.Error("the login page does not say the password changed")
	}
	if status, _, _ := e.getAs(t, &vic, "/", nil); status != http.StatusSeeOther {
		t.Errorf("the old session still works: %d", status)
	}
	if _, err := e.auth.Login(context.Background(), "vic", "a brand new one", "127.0.0.1", "test"); err != nil {
		t.Errorf("sign in with the new password: %v", err)
	}

	ann := e.session("ann")
	if _, _, users := e.getAs(t, &ann, "/admin/users", nil); !strings.Contains(users, `data-confirm="Disable vic? Their sessions end at once."`) {
		t.Error("Disable does not ask for confirmation")
	}
	status, h, _ = e.postAs(t, &ann, "/admin/users/vic", url.Values{"op": {"passwd"}, "password": {"reset by ann"}}, postOpts{})
	if _, _, page := e.follow(t, &ann, h); status != http.StatusSeeOther || !strings.Contains(page, "vic&#39;s password is reset") {
		t.Fatalf("admin reset: %d", status)
	}
	if _, err := e.auth.Login(context.Background(), "vic", "reset by ann", "127.0.0.1", "test"); err != nil {
		t.Errorf("sign in with the reset password: %v", err)
	}
	// Sign out says so.
	status, h, _ = e.postAs(t, &ann, "/logout", nil, postOpts{})
	if _, _, page := e.follow(t, nil, h); status != http.StatusSeeOther || !strings.Contains(page, "You are signed out.") {
		t.Errorf("sign out: %d, without the message", status)
	}
}

// TestFailedLoginIsAudited: a refused sign-in is in the audit trail with
// the name tried, the address and why; the audit page shows it in words.
func TestFailedLoginIsAudited(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("vic", auth.RoleViewer)
	if _, err := e.auth.Login(context.Background(), "vic", "not vic's password", "203.0.113.9", "test"); err == nil {
		t.Fatal("a wrong password signed in")
	}
	if _, err := e.auth.Login(context.Background(), "nobody", "whatever1", "203.0.113.9", "test"); err == nil {
		t.Fatal("an unknown user signed in")
	}
	evs, err := e.auth.AuditTrail(context.Background(), auth.AuditFilter{Kind: auth.AuditLoginFailed, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Actor != "vic" || !strings.Contains(string(evs[1].Data), "wrong password") ||
		!strings.Contains(string(evs[1].Data), "203.0.113.9") || !strings.Contains(string(evs[0].Data), "no such user") {
		t.Fatalf("failed logins in the audit trail: %+v", evs)
	}
	ann := e.session("ann")
	_, _, page := e.getAs(t, &ann, "/audit?kind=login", nil)
	if !strings.Contains(page, "Login failed") || !strings.Contains(page, "<dt>Reason</dt><dd>wrong password</dd>") ||
		!strings.Contains(page, `type="datetime-local"`) {
		t.Fatal("the audit page does not show the failed login in words, or has no date pickers")
	}
}

// TestCreatorAtTheMergeSeesWhoMayApprove: the creator of a task at its
// merge (separation of duties) is told who may approve it, by the
// Decider's own rules: nobody yet (with the Users page for an admin and
// the solo path), then the approver an admin added; the inbox marks the
// merge as needing another approver.
func TestCreatorAtTheMergeSeesWhoMayApprove(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann") // an admin
	status, h, _ := e.postAs(t, &ann, "/tasks/new", url.Values{"workflow": {"feature"},
		"input.description": {"Dark mode."}, "gate.allowMerge": {"human"}}, postOpts{})
	if status != http.StatusSeeOther {
		t.Fatalf("start: %d", status)
	}
	id := strings.TrimPrefix(h.Get("Location"), "/tasks/")
	e.waitPending(id, "merge")
	_, _, page := e.getAs(t, &ann, "/tasks/"+id, nil)
	for _, want := range []string{"You started this task, so separation of duties lets another approver",
		"Nobody else may approve it yet", `href="/admin/users"`, "GATEHOUSE_SOD_KINDS=none make run"} {
		if !strings.Contains(page, want) {
			t.Errorf("the creator's merge lacks %q", want)
		}
	}
	if strings.Contains(page, `name="action" value="approve"`) {
		t.Error("the creator is offered Approve")
	}
	e.user("bob", auth.RoleApprover)
	e.user("cy", auth.RoleApprover, "prd") // may not decide merges
	_, _, page = e.getAs(t, &ann, "/tasks/"+id, nil)
	if !strings.Contains(page, "Who may approve it: <strong>bob (approver)</strong>.") {
		t.Error("the creator is not told that bob may approve")
	}
	if _, _, inbox := e.getAs(t, &ann, "/inbox", nil); !strings.Contains(inbox, "needs another approver than ann") {
		t.Error("the inbox does not mark the merge as needing another approver")
	}
}

// TestTaskWithoutGatesSaysSo: a finished task that never waited says it
// had no gates, not "No decisions yet"; its deliverable comes first.
func TestTaskWithoutGatesSaysSo(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	task, err := e.engine.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: "No gates",
		Input: json.RawMessage(`{"description":"Dark mode."}`), CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.Wake()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := e.store.Task(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == graph.StatusSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ann := e.session("ann")
	_, _, page := e.getAs(t, &ann, "/tasks/"+task.ID, nil)
	if !strings.Contains(page, "This task had no gates") || strings.Contains(page, "No decisions yet") {
		t.Error("a task without gates does not say so")
	}
	if !strings.Contains(page, `data-deliverable="merge.md"`) {
		t.Error("no deliverable first")
	}
}
