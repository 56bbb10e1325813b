package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestAdminUserContact: the users page adds a user with an email, and sets
// or clears a user's email and Slack id; a bad one changes nothing.
func TestAdminUserContact(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	ann := e.session("ann")
	ctx := context.Background()
	if status, _, _ := e.postAs(t, &ann, "/admin/users", url.Values{"username": {"pat"}, "role": {"approver"},
		"email": {"pat@example.com"}, "password": {"long enough"}}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("add with email: %d", status)
	}
	if u, err := e.auth.Store().UserByName(ctx, "pat"); err != nil || u.Email != "pat@example.com" {
		t.Fatalf("pat: %+v %v", u, err)
	}
	status, _, body := e.postAs(t, &ann, "/admin/users", url.Values{"username": {"quin"}, "role": {"viewer"},
		"email": {"<script>@x"}, "password": {"long enough"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "Email: ") || strings.Contains(body, "<script>@x") {
		t.Fatalf("bad email on add: %d", status)
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/users/pat", url.Values{"op": {"contact"}, "email": {"p2@example.com"},
		"slack_id": {"U0PAT"}}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("contact: %d", status)
	}
	if u, _ := e.auth.Store().UserByName(ctx, "pat"); u.Email != "p2@example.com" || u.SlackID != "U0PAT" {
		t.Fatalf("pat after contact: %+v", u)
	}
	_, _, page := e.getAs(t, &ann, "/admin/users", nil)
	if !strings.Contains(page, `value="p2@example.com"`) || !strings.Contains(page, `value="U0PAT"`) {
		t.Errorf("page does not show pat's contact")
	}
	// A bad Slack id refuses the whole form: the email stays.
	status, _, body = e.postAs(t, &ann, "/admin/users/pat", url.Values{"op": {"contact"}, "email": {"p3@example.com"},
		"slack_id": {"nope"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "Slack user id") {
		t.Fatalf("bad slack id: %d", status)
	}
	if u, _ := e.auth.Store().UserByName(ctx, "pat"); u.Email != "p2@example.com" {
		t.Fatalf("email changed by a refused form: %+v", u)
	}
	e.user("rae", auth.RoleApprover)
	status, _, body = e.postAs(t, &ann, "/admin/users/rae", url.Values{"op": {"contact"}, "slack_id": {"U0PAT"}}, postOpts{})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "belongs to another user") {
		t.Fatalf("a taken slack id: %d", status)
	}
}
