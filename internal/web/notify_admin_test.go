package web

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
)

// TestAdminUserContact: the users page adds a user with an email, and sets
// or clears a user's email and Slack id; a bad one changes nothing.
func TestAdminUserContact(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
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

// TestAdminWebhooks: the page adds an endpoint (its secret shown once),
// refuses private and malformed URLs with the reason, lists deliveries
// with their attempts, redelivers and removes.
func TestAdminWebhooks(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ann := e.session("ann")
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/x", "loopback address"},
		{"http://192.168.0.10/x", "private address"},
		{"ftp://example.com/x", "want an http:// or https:// URL"},
	} {
		status, _, body := e.postAs(t, &ann, "/admin/webhooks", url.Values{"url": {c.url}}, postOpts{})
		if status != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d, want 400 saying %q", c.url, status, c.want)
		}
	}
	if status, _, body := e.postAs(t, &ann, "/admin/webhooks", url.Values{"url": {"https://93.184.216.34/x"}, "events": {"task.exploded"}}, postOpts{}); status != http.StatusBadRequest ||
		!strings.Contains(body, "unknown event") {
		t.Errorf("bad event: %d", status)
	}
	if eps, _ := e.store.Endpoints(ctx); len(eps) != 0 {
		t.Fatalf("refused adds stored %d endpoints", len(eps))
	}
	status, _, body := e.postAs(t, &ann, "/admin/webhooks", url.Values{"url": {"https://93.184.216.34/hook"}, "events": {"interrupt.raised"}}, postOpts{})
	secret := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{44}`).FindString(body)
	if status != http.StatusOK || secret == "" {
		t.Fatalf("add: %d", status)
	}
	// A raise writes a delivery (no sender runs here: it stays pending).
	id := e.createFeature("Hooked")
	e.waitPending(id, "prd")
	_, _, page := e.getAs(t, &ann, "/admin/webhooks", nil)
	if strings.Contains(page, secret) {
		t.Error("the secret is shown again")
	}
	m := regexp.MustCompile(`data-delivery="([0-9a-f-]{36})" data-state="pending"`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "https://93.184.216.34/hook") || !strings.Contains(page, "interrupt.raised") {
		t.Fatalf("page lacks the endpoint or its delivery")
	}
	// A pending delivery says when it is tried next, and offers to try it
	// now (issue 27, item 11).
	if _, err := e.pool.Exec(ctx, "UPDATE outbox SET next_at = now() + interval '10 minutes'"); err != nil {
		t.Fatal(err)
	}
	_, _, page = e.getAs(t, &ann, "/admin/webhooks", nil)
	if !strings.Contains(page, `class="next-try`) || !regexp.MustCompile(`next try <time datetime="[^"]+">`).MatchString(page) ||
		!strings.Contains(page, ">Retry now</button>") {
		t.Error("the pending delivery does not say its next try, or offers no Retry now")
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/webhooks/deliveries/"+m[1]+"/redeliver", url.Values{}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("retry now: %d", status)
	}
	if dl, err := e.store.Delivery(ctx, m[1]); err != nil || dl.State != notify.StatePending || time.Until(dl.NextAt) > time.Second {
		t.Fatalf("after retry now: %+v %v", dl, err)
	}
	if _, err := e.pool.Exec(ctx, "UPDATE outbox SET state = 'failed', next_at = now() + interval '1 day'"); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.postAs(t, &ann, "/admin/webhooks/deliveries/"+m[1]+"/redeliver", url.Values{}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("redeliver: %d", status)
	}
	dl, err := e.store.Delivery(ctx, m[1])
	if err != nil || dl.State != notify.StatePending || time.Until(dl.NextAt) > time.Second {
		t.Fatalf("after redeliver: %+v %v", dl, err)
	}
	eps, _ := e.store.Endpoints(ctx)
	if status, _, _ := e.postAs(t, &ann, "/admin/webhooks/"+eps[0].ID+"/remove", url.Values{}, postOpts{}); status != http.StatusSeeOther {
		t.Fatalf("remove: %d", status)
	}
	if eps, _ := e.store.Endpoints(ctx); len(eps) != 0 {
		t.Fatalf("%d endpoints after remove", len(eps))
	}
}
