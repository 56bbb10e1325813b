package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/notify/email"
	"github.com/gatehousehq/gatehouse/internal/notify/notifytest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// mailOpts are withRunner's, with a store that writes email deliveries.
func mailOpts() setupOpts {
	o := withRunner()
	o.outbox = postgres.Outbox{Email: true, Audience: postgres.PolicyAudience(*o.policy)}
	return o
}

// withMail runs a sender, woken by the hub, that sends the deliveries of
// e's store (setup with mailOpts) through a real SMTP server on loopback.
func (e *bundle) withMail(t *testing.T) *notifytest.SMTPServer {
	t.Helper()
	srv := notifytest.NewSMTPServer(t)
	mailer := email.New(e.store, email.SMTP{Host: srv.Host, Port: srv.Port}, "Gatehouse <gatehouse@example.com>", e.base)
	s := notify.NewSender(notify.Config{Store: e.store, Channels: map[string]notify.Channel{notify.ChannelEmail: mailer},
		Scale: 0.001, Logger: e.log})
	e.hub.OnOutbox(s.Wake)
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return srv
}

// approverByMail makes name an approver with the address
// name@example.com and starts the mail sender (setup with mailOpts).
func (e *bundle) approverByMail(t *testing.T, name string) *notifytest.SMTPServer {
	t.Helper()
	e.user(name, auth.RoleApprover)
	if err := e.auth.SetEmail(context.Background(), "test", name, name+"@example.com"); err != nil {
		t.Fatal(err)
	}
	return e.withMail(t)
}

var actLinkRe = regexp.MustCompile(`http://[^/\s"]+(/act/[A-Za-z0-9_-]{43})`)

// link is the action link path in a message.
func actLinkOf(t *testing.T, m notifytest.Message) string {
	t.Helper()
	text := actLinkRe.FindStringSubmatch(m.Text)
	html := actLinkRe.FindStringSubmatch(m.HTML)
	if text == nil || html == nil || text[1] != html[1] {
		t.Fatalf("no single action link in both parts:\n%s\n%s", m.Text, m.HTML)
	}
	return text[1]
}

func (e *bundle) createAs(t *testing.T, who, title, gates string) string {
	t.Helper()
	task, err := e.engine.Create(context.Background(), graph.NewTask{Workflow: "feature", Title: title,
		Input:   json.RawMessage(`{"description":"` + featuretest.DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":` + gates + `}`), CreatedBy: who})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.Wake()
	return task.ID
}

// rawGet fetches path with no session, as a user agent.
func (e *bundle) rawDo(t *testing.T, method, path, ua string, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.base)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = ioCopy(&b, resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}

var formKeyRe = regexp.MustCompile(`name="_act" value="([^"]+)"`)

// TestActionLinksByEmail: the interrupt's deciders get one email each
// (not the creator of a kind under separation of duties, not a viewer, not
// a user without an address), with one action link that prefetching
// leaves alone, that decides once and only by POST, as its recipient.
func TestActionLinksByEmail(t *testing.T) {
	t.Parallel()
	e := setup(t, mailOpts())
	ctx := context.Background()
	for name, role := range map[string]auth.Role{"alice": auth.RoleApprover, "bob": auth.RoleApprover,
		"carol": auth.RoleApprover, "dave": auth.RoleViewer, "eve": auth.RoleApprover} {
		e.user(name, role)
		if name != "eve" {
			if err := e.auth.SetEmail(ctx, "test", name, name+"@example.com"); err != nil {
				t.Fatal(err)
			}
		}
	}
	smtp := e.withMail(t)
	// carol starts it: merge is a kind under separation of duties.
	id := e.createAs(t, "carol", "Carol's <merge>", `{"allowPrd":true,"allowPlan":true}`)
	itr := e.waitPending(id, "merge")
	msgs := smtp.Wait(t, 2, 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	if msgs = smtp.Messages(); len(msgs) != 2 {
		t.Fatalf("%d messages, want 2 (alice, bob)", len(msgs))
	}
	links := map[string]string{}
	for _, m := range msgs {
		if len(m.To) != 1 {
			t.Fatalf("recipients %v: want one per message", m.To)
		}
		links[m.To[0]] = actLinkOf(t, m)
		if subj := m.Header.Get("Subject"); !strings.Contains(subj, "Merge") || !strings.Contains(subj, "Carol's <merge>") {
			t.Errorf("subject %q", subj)
		}
		if !strings.Contains(m.HTML, "Carol&#39;s &lt;merge&gt;") || strings.Contains(m.HTML, "<merge>") {
			t.Errorf("the title is not escaped in the HTML part")
		}
		if !strings.HasPrefix(m.Header.Get("Message-Id"), "<") || m.Header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("headers: %v", m.Header)
		}
	}
	if got := slices.Sorted(mapKeys(links)); !slices.Equal(got, []string{"alice@example.com", "bob@example.com"}) {
		t.Fatalf("mailed %v, want alice and bob only", got)
	}
	aliceLink, bobLink := links["alice@example.com"], links["bob@example.com"]

	unchanged := func(when string) {
		t.Helper()
		cur, err := e.store.Interrupt(ctx, itr.ID)
		if err != nil || cur.Status != graph.InterruptPending {
			t.Fatalf("%s: interrupt %+v %v", when, cur, err)
		}
		decs, _ := e.store.Decisions(ctx, id)
		if len(decs) != 0 {
			t.Fatalf("%s: decisions %+v", when, decs)
		}
	}
	// Prefetchers and link checkers: a page, and nothing changes.
	for _, ua := range []string{
		"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com",
		"Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.12026; Pro) SafeLinks",
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"curl/8.5.0",
	} {
		status, h, body := e.rawDo(t, http.MethodGet, aliceLink, ua, nil)
		if status != http.StatusOK || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Set-Cookie") != "" ||
			!strings.Contains(body, `name="action" value="approve"`) || !strings.Contains(body, `<textarea id="feedback" name="feedback"`) {
			t.Fatalf("GET as %q: %d %v", ua, status, h)
		}
	}
	if status, _, _ := e.rawDo(t, http.MethodHead, aliceLink, "", nil); status != http.StatusOK {
		t.Fatalf("HEAD: %d", status)
	}
	unchanged("after prefetches")
	_, _, page := e.rawDo(t, http.MethodGet, aliceLink, "", nil)
	key := formKeyRe.FindStringSubmatch(page)[1]

	// Forged, truncated, unknown: refused, nothing changes.
	if status, _, _ := e.rawDo(t, http.MethodPost, aliceLink, "", url.Values{"action": {"approve"}, "_act": {"forged"}}); status != http.StatusForbidden {
		t.Errorf("forged form key: %d", status)
	}
	_, _, bobPage := e.rawDo(t, http.MethodGet, bobLink, "", nil)
	bobKey := formKeyRe.FindStringSubmatch(bobPage)[1]
	if status, _, _ := e.rawDo(t, http.MethodPost, aliceLink, "", url.Values{"action": {"approve"}, "_act": {bobKey}}); status != http.StatusForbidden {
		t.Errorf("another link's form key: %d", status)
	}
	if status, _, _ := e.rawDo(t, http.MethodPost, aliceLink[:len(aliceLink)-3], "", url.Values{"action": {"approve"}, "_act": {key}}); status != http.StatusNotFound {
		t.Errorf("truncated token: %d", status)
	}
	if status, _, _ := e.rawDo(t, http.MethodGet, "/act/"+strings.Repeat("A", 43), "", nil); status != http.StatusNotFound {
		t.Errorf("unknown token: %d", status)
	}
	// A rejection needs words: refused, the form again, nothing changes.
	if status, _, body := e.rawDo(t, http.MethodPost, aliceLink, "", url.Values{"action": {"reject"}, "_act": {key}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `id="act-error"`) {
		t.Errorf("reject without feedback: %d", status)
	}
	unchanged("after refused posts")

	// Alice approves by POST: decided as alice.
	status, _, body := e.rawDo(t, http.MethodPost, aliceLink, "", url.Values{"action": {"approve"}, "_act": {key}})
	if status != http.StatusOK || !strings.Contains(body, "alice approved this Merge") {
		t.Fatalf("approve: %d %s", status, body)
	}
	decs, _ := e.store.Decisions(ctx, id)
	if len(decs) != 1 || decs[0].DecidedBy != "alice" || decs[0].Action != "approve" {
		t.Fatalf("decisions %+v", decs)
	}
	// Spent: alice's link again, and bob's, say who decided what and when.
	for _, l := range []string{aliceLink, bobLink} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			var form url.Values
			if m == http.MethodPost {
				form = url.Values{"action": {"reject"}, "feedback": {"no"}, "_act": {key}}
				if l == bobLink {
					form["_act"] = []string{bobKey}
				}
			}
			status, _, body := e.rawDo(t, m, l, "", form)
			if status != http.StatusGone || !strings.Contains(body, "alice approved this Merge at") {
				t.Errorf("%s spent link: %d %s", m, status, body)
			}
		}
	}
	if decs, _ := e.store.Decisions(ctx, id); len(decs) != 1 {
		t.Fatalf("decisions after replays: %+v", decs)
	}
}

// TestActionLinkPolicy: a link decides only what its recipient may: the
// Decider refuses separation of duties and a kind not allowed, with the
// reason, and the link stays usable; an expired link answers 410.
func TestActionLinkPolicy(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ctx := context.Background()
	e.user("carol", auth.RoleApprover)
	e.user("frank", auth.RoleApprover, "prd")
	e.user("gina", auth.RoleApprover)
	id := e.createAs(t, "carol", "SoD", `{"allowPrd":true,"allowPlan":true}`)
	itr := e.waitPending(id, "merge")
	mk := func(who string, expires time.Time) (string, string) {
		token, hash := notify.ActionToken()
		if err := e.store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: itr.ID, TaskID: id, Recipient: who,
			ExpiresAt: expires}, ""); err != nil {
			t.Fatal(err)
		}
		_, _, page := e.rawDo(t, http.MethodGet, "/act/"+token, "", nil)
		m := formKeyRe.FindStringSubmatch(page)
		if m == nil {
			return "/act/" + token, ""
		}
		return "/act/" + token, m[1]
	}
	for who, want := range map[string]string{"carol": "eparation of duties", "frank": "may decide only prd"} {
		link, key := mk(who, time.Now().Add(time.Hour))
		status, _, body := e.rawDo(t, http.MethodPost, link, "", url.Values{"action": {"approve"}, "_act": {key}})
		if status != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 403 saying %q", who, status, want)
		}
		if status, _, _ := e.rawDo(t, http.MethodGet, link, "", nil); status != http.StatusOK {
			t.Errorf("%s's link after a refusal: %d, want still usable", who, status)
		}
	}
	link, _ := mk("gina", time.Now().Add(-time.Second))
	if status, _, body := e.rawDo(t, http.MethodGet, link, "", nil); status != http.StatusGone || !strings.Contains(body, "This link ended at") {
		t.Errorf("expired link: %d %s", status, body)
	}
	if cur, _ := e.store.Interrupt(ctx, itr.ID); cur.Status != graph.InterruptPending {
		t.Fatalf("interrupt %s after refusals", cur.Status)
	}
}

func mapKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func ioCopy(w *strings.Builder, r interface{ Read([]byte) (int, error) }) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		w.Write(buf[:k])
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

// TestActionLinkRefusedByClaim: while bob holds the claim on an interrupt
// (SPEC §11), alice's action link shows who holds it, and its POST is
// refused (409) with the reason on the page; nothing is recorded and the
// link is not spent. Once bob releases the claim — or once it ends — the
// same link and form decide as alice.
func TestActionLinkRefusedByClaim(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	ctx := context.Background()
	e.user("alice", auth.RoleApprover)
	e.user("bob", auth.RoleApprover)
	e.user("carol", auth.RoleApprover)
	for _, end := range []string{"released", "expired"} {
		id := e.createAs(t, "carol", "Claimed <merge> "+end, `{"allowPrd":true,"allowPlan":true}`)
		itr := e.waitPending(id, "merge")
		token, hash := notify.ActionToken()
		if err := e.store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: itr.ID, TaskID: id, Recipient: "alice",
			ExpiresAt: time.Now().Add(time.Hour)}, ""); err != nil {
			t.Fatal(err)
		}
		link := "/act/" + token
		if _, err := e.store.ClaimInterrupt(ctx, postgres.ClaimRequest{InterruptID: itr.ID, Who: "bob", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		// The page says who holds it.
		status, _, page := e.rawDo(t, http.MethodGet, link, "", nil)
		if status != http.StatusOK || !strings.Contains(page, `data-claim`) || !strings.Contains(page, "bob has claimed this Merge until") {
			t.Fatalf("%s: GET while claimed: %d\n%s", end, status, page)
		}
		key := formKeyRe.FindStringSubmatch(page)[1]
		var events int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM task_events WHERE task_id = $1", id).Scan(&events); err != nil {
			t.Fatal(err)
		}
		form := url.Values{"action": {"reject"}, "feedback": {"Needs a <rollback> plan"}, "_act": {key}}
		status, _, body := e.rawDo(t, http.MethodPost, link, "", form)
		if status != http.StatusConflict || !strings.Contains(body, `id="act-error"`) ||
			!strings.Contains(body, "Not recorded: bob has claimed this Merge") ||
			!strings.Contains(body, "Needs a &lt;rollback&gt; plan") || !strings.Contains(body, `name="_act" value="`+key+`"`) {
			t.Fatalf("%s: POST while claimed: %d, want 409 with the reason and the form again\n%s", end, status, body)
		}
		cur, err := e.store.Interrupt(ctx, itr.ID)
		if err != nil || cur.Status != graph.InterruptPending || cur.ClaimedBy != "bob" {
			t.Fatalf("%s: after the refusal: %+v %v", end, cur, err)
		}
		if decs, _ := e.store.Decisions(ctx, id); len(decs) != 0 {
			t.Fatalf("%s: decisions after the refusal: %+v", end, decs)
		}
		var after int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM task_events WHERE task_id = $1", id).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != events {
			t.Errorf("%s: the refusal wrote %d events", end, after-events)
		}
		if l, err := e.store.ActionLink(ctx, hash); err != nil || l.UsedAt != nil {
			t.Fatalf("%s: the link after the refusal: %+v %v, want unspent", end, l, err)
		}

		switch end {
		case "released":
			if _, err := e.store.ReleaseInterrupt(ctx, itr.ID, "bob", false); err != nil {
				t.Fatal(err)
			}
		case "expired":
			if _, err := e.pool.Exec(ctx, "UPDATE interrupts SET claim_expires_at = now() - interval '1 second' WHERE id = $1", itr.ID); err != nil {
				t.Fatal(err)
			}
		}
		if status, _, page := e.rawDo(t, http.MethodGet, link, "", nil); status != http.StatusOK || strings.Contains(page, "data-claim") {
			t.Errorf("%s: GET after the claim: %d, want the form without a claim note", end, status)
		}
		status, _, body = e.rawDo(t, http.MethodPost, link, "", form)
		if status != http.StatusOK || !strings.Contains(body, "alice rejected this Merge") {
			t.Fatalf("%s: POST after the claim: %d\n%s", end, status, body)
		}
		decs, _ := e.store.Decisions(ctx, id)
		if len(decs) != 1 || decs[0].DecidedBy != "alice" || decs[0].Action != graph.ActionReject ||
			decs[0].Feedback != "Needs a <rollback> plan" {
			t.Fatalf("%s: decisions %+v", end, decs)
		}
		if status, _, _ := e.rawDo(t, http.MethodPost, link, "", form); status != http.StatusGone {
			t.Errorf("%s: the link after deciding: %d, want 410", end, status)
		}
	}
}
