package main

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/notify/notifytest"
)

var actLinkRe = regexp.MustCompile(`http://gatehouse\.test(/act/[A-Za-z0-9_-]{43})`)

// addUser runs gatehouse users add with an email address.
func addUser(t *testing.T, dbURL, name, role, email string) {
	t.Helper()
	cmd := exec.Command(binary, "users", "add", name, "--role", role, "--email", email)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	cmd.Stdin = strings.NewReader(name + "-password-long\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("users add %s: %v %s", name, err, out)
	}
}

// TestE2ETimerNotices: a reminder, an escalation and an expiry each
// deliver their webhook (interrupt.reminder, interrupt.escalated,
// interrupt.expired, signed, verified by the reference library) and mail
// whom SPEC §12 says: a reminder, the deciders who have not decided at the
// interrupt's escalation level; an escalation, the deciders it added. The
// PRD needs two approvals from alice and bob; escalation adds group:leads
// (lena, an approver; vic, a viewer who may not decide); zed is an
// approver the policy does not name. Alice approves first, by her link.
// Each timer is made due in the database and the keeper poked, as
// another replica's NOTIFY would.
func TestE2ETimerNotices(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	smtp := notifytest.NewSMTPServer(t)
	for _, u := range [][2]string{{"alice", "approver"}, {"bob", "approver"}, {"lena", "approver"}, {"vic", "viewer"},
		{"zed", "approver"}} {
		addUser(t, d.url, u[0], u[1], u[0]+"@example.com")
	}
	r := newReceiver(t, nil)
	r.setSecret(addWebhook(t, d.url, r.srv.URL+"/hook", "--events", "interrupt.reminder,interrupt.escalated,interrupt.expired"))
	policy := writePolicyFile(t, `groups: {leads: [lena, vic]}
kinds:
  prd:
    approvals: 2
    deciders: [user:alice, user:bob]
    deadline: 1h
    on_timeout: fail
    reminders: [50m, 10m]
    escalate: [{after: 20m, to: [group:leads]}]
`)
	p := serve(t, d.url, append(webhookEnv, "GATEHOUSE_POLICY_FILE="+policy,
		"GATEHOUSE_SMTP_URL=smtp://127.0.0.1:"+strconv.Itoa(smtp.Port), "GATEHOUSE_SMTP_FROM=Gatehouse <gh@example.com>")...)
	itr := p.waitingAt(t)

	// settled waits until every delivery was sent, then returns the
	// messages that arrived since the last call, by recipient.
	seen := 0
	settled := func(when string) map[string]notifytest.Message {
		t.Helper()
		waitFor(t, func() bool { return d.int("SELECT count(*) FROM outbox WHERE state = 'pending'") == 0 })
		if n := d.int("SELECT count(*) FROM outbox WHERE state <> 'delivered'"); n != 0 {
			t.Fatalf("%s: %d deliveries failed", when, n)
		}
		msgs := smtp.Messages()
		out := map[string]notifytest.Message{}
		for _, m := range msgs[seen:] {
			if len(m.To) != 1 {
				t.Fatalf("%s: a message to %v, want one recipient each", when, m.To)
			}
			if _, dup := out[m.To[0]]; dup {
				t.Errorf("%s: two messages to %s", when, m.To[0])
			}
			out[m.To[0]] = m
		}
		seen = len(msgs)
		return out
	}
	expect := func(when string, got map[string]notifytest.Message, subject string, to ...string) {
		t.Helper()
		var who []string
		for addr, m := range got {
			who = append(who, strings.TrimSuffix(addr, "@example.com"))
			if s := m.Header.Get("Subject"); !strings.HasPrefix(s, subject) {
				t.Errorf("%s: subject %q to %s, want %q…", when, s, addr, subject)
			}
			if subject != "" && !actLinkRe.MatchString(m.Text) {
				t.Errorf("%s: no action link in the message to %s", when, addr)
			}
		}
		slices.Sort(who)
		if !slices.Equal(who, to) {
			t.Errorf("%s: mailed %v, want %v", when, who, to)
		}
	}
	raised := settled("raised")
	expect("raised", raised, "[Gatehouse] PRD waits for your decision", "alice", "bob")

	// Alice approves by her link: one approval of two; she has decided.
	link := actLinkRe.FindStringSubmatch(raised["alice@example.com"].Text)[1]
	resp, err := http.Get(p.url(link))
	if err != nil {
		t.Fatal(err)
	}
	page := new(strings.Builder)
	_, _ = ioCopyAll(page, resp)
	key := regexp.MustCompile(`name="_act" value="([^"]+)"`).FindStringSubmatch(page.String())[1]
	req, _ := http.NewRequest(http.MethodPost, p.url(link), strings.NewReader(url.Values{"action": {"approve"}, "_act": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+p.Addr)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = ioCopyAll(body, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "it waits for another approver") {
		t.Fatalf("alice's approval: %d\n%s", resp.StatusCode, body)
	}

	fire := func(what string, step int) {
		t.Helper()
		if n := d.int(`WITH u AS (UPDATE interrupt_timers SET due_at = now() WHERE interrupt_id = $1 AND what = $2 AND step = $3
			RETURNING 1) SELECT count(*) FROM u`, itr.ID, what, step); n != 1 {
			t.Fatalf("no %s timer %d", what, step)
		}
		if _, err := d.pool.Exec(t.Context(), "SELECT pg_notify('gatehouse_timers', '')"); err != nil {
			t.Fatal(err)
		}
	}
	hookOf := func(n int, typ string) hook {
		t.Helper()
		h := r.waitHooks(n, 30*time.Second)[n-1]
		data, _ := h.Body["data"].(map[string]any)
		itrData, _ := data["interrupt"].(map[string]any)
		task, _ := data["task"].(map[string]any)
		if h.Type != typ || itrData["id"] != itr.ID || task["id"] != itr.TaskID {
			t.Fatalf("webhook %d: %s %v, want %s of interrupt %s", n, h.Type, h.Body, typ, itr.ID)
		}
		return h
	}

	// Reminder at level 0: bob, who has not decided; not alice.
	fire("reminder", 1)
	hookOf(1, "interrupt.reminder")
	expect("first reminder", settled("first reminder"), "[Gatehouse] Reminder: PRD waits for your decision", "bob")

	// Escalation to group:leads: lena, the approver it added; not vic
	// (a viewer), not alice and bob (deciders already), not zed.
	fire("escalate", 1)
	h := hookOf(2, "interrupt.escalated")
	if lvl := h.Body["data"].(map[string]any)["interrupt"].(map[string]any)["escalation_level"]; lvl != float64(1) {
		t.Errorf("escalated: escalation_level %v", lvl)
	}
	expect("escalation", settled("escalation"), "[Gatehouse] Escalated to you: PRD", "lena")

	// Reminder at level 1: the level's deciders who have not decided.
	fire("reminder", 2)
	hookOf(3, "interrupt.reminder")
	expect("second reminder", settled("second reminder"), "[Gatehouse] Reminder: PRD waits for your decision", "bob", "lena")

	// Expiry: its webhook; no mail (the creator is a token).
	fire("deadline", 0)
	hookOf(4, "interrupt.expired")
	expect("expiry", settled("expiry"), "")
	d.waitFor(20*time.Second, "failed tasks", "SELECT count(*) FROM tasks WHERE status = 'failed'", 1)

	hooks := r.hooks()
	ids := map[string]bool{}
	for _, h := range hooks {
		ids[h.ID] = true
	}
	if len(hooks) != 4 || len(ids) != 4 {
		t.Errorf("%d webhook requests with %d ids, want 4 deliveries of one attempt each: %+v", len(hooks), len(ids), hooks)
	}
	r.assertVerified()
}
