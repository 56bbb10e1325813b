package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPruneUsage(t *testing.T) {
	t.Parallel()
	withDB := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/nowhere"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"prune", "--older-than", "30d"}, withDB, "-older-than: want a positive duration such as 720h"},
		{[]string{"prune", "--older-than", "-5h"}, withDB, "-older-than: want a positive duration"},
		{[]string{"prune", "--older-than", "0"}, withDB, "-older-than: want a positive duration"},
		{[]string{"prune", "--older-than"}, withDB, "flag needs an argument: -older-than"},
		{[]string{"prune"}, withDB, "prune needs --older-than DURATION"},
		{[]string{"prune", "--dry-run"}, withDB, "prune needs --older-than DURATION"},
		{[]string{"prune", "--older-than", "720h", "now"}, withDB, `prune takes no arguments, got "now"`},
		{[]string{"prune", "--older-than", "720h", "--dry-run=maybe"}, withDB, "-dry-run"},
		{[]string{"prune", "--since", "1h"}, withDB, "flag provided but not defined: -since"},
		{[]string{"prune", "--older-than", "720h"}, nil, "DATABASE_URL is not set"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": "postgres://x", "GATEHOUSE_HISTORY_RETENTION": "30d"},
			`GATEHOUSE_HISTORY_RETENTION="30d": want a duration such as 720h`},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": "postgres://x", "GATEHOUSE_OUTBOX_RETENTION": "30d"},
			`GATEHOUSE_OUTBOX_RETENTION="30d": want a duration such as 720h`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, func(k string) string { return c.env[k] }, strings.NewReader(""),
			&stdout, &stderr)
		if code != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"prune", "--help"}, func(string) string { return "" }, nil, &stdout,
		io.Discard); code != 0 || !strings.Contains(stdout.String(), "prune --older-than DURATION [--dry-run]") ||
		!strings.Contains(stdout.String(), "-dry-run") {
		t.Errorf("prune --help: exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"serve", "--help"}, func(string) string { return "" }, nil, &stdout,
		io.Discard); code != 0 || !strings.Contains(stdout.String(), "GATEHOUSE_OUTBOX_RETENTION") ||
		!strings.Contains(stdout.String(), "GATEHOUSE_HISTORY_RETENTION") || !strings.Contains(stdout.String(), "DATABASE_URL") {
		t.Errorf("serve --help: exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"--help"}, func(string) string { return "" }, nil, &stdout,
		io.Discard); code != 0 || !strings.Contains(stdout.String(), "prune --older-than DURATION") ||
		!strings.Contains(stdout.String(), "GATEHOUSE_HISTORY_RETENTION") ||
		!strings.Contains(stdout.String(), "GATEHOUSE_OUTBOX_RETENTION") {
		t.Errorf("--help: exit %d\n%s", code, stdout.String())
	}
}

// steps lists the steps of a task's history as GET
// /api/v1/tasks/{id}/checkpoints serves it.
func (p *proc) steps(id string) []int {
	p.t.Helper()
	var out struct {
		Checkpoints []struct {
			Step int `json:"step"`
		} `json:"checkpoints"`
	}
	if code := p.do("GET", "/api/v1/tasks/"+id+"/checkpoints", nil, &out); code != http.StatusOK {
		p.t.Fatalf("checkpoints of %s: status %d", id, code)
	}
	var steps []int
	for _, c := range out.Checkpoints {
		steps = append(steps, c.Step)
	}
	return steps
}

func (p *proc) eventCount(id string) int {
	p.t.Helper()
	var out struct {
		Events []eventJSON `json:"events"`
	}
	if code := p.do("GET", "/api/v1/tasks/"+id+"/events?limit=1000", nil, &out); code != http.StatusOK {
		p.t.Fatalf("events of %s: status %d", id, code)
	}
	return len(out.Events)
}

// deskPage signs in as admin and fetches a desk page.
func (p *proc) deskPage(path, password string) (int, string) {
	p.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(p.url("/login"))
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	loginURL, _ := url.Parse(p.url("/login"))
	var csrf string
	for _, ck := range jar.Cookies(loginURL) {
		if ck.Name == "gatehouse_login" {
			csrf = ck.Value
		}
	}
	resp, err = c.PostForm(p.url("/login"), url.Values{"username": {"admin"}, "password": {password}, "_csrf": {csrf},
		"next": {path}})
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestE2EPruneHistory: gatehouse prune on the database of a running
// server, which still serves the pruned task through the API and the desk;
// then a server with GATEHOUSE_HISTORY_RETENTION prunes on its own and
// stops cleanly.
func TestE2EPruneHistory(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const password = "prune-test-password"
	p := serve(t, d.url, "GATEHOUSE_ADMIN_PASSWORD="+password)
	old := p.createFeature(nil, "Old feature: export reports as CSV")
	waiting := p.createFeature(map[string]any{"gates": map[string]any{}}, "Old feature still waiting for its PRD")
	recent := p.createFeature(nil, "Recent feature: import reports from CSV")
	d.waitAll(30 * time.Second)
	ctx := context.Background()
	backdate := func(ids ...string) {
		t.Helper()
		if _, err := d.pool.Exec(ctx, `UPDATE tasks SET created_at = created_at - interval '40 days',
			completed_at = completed_at - interval '40 days' WHERE id = ANY($1::uuid[])`, ids); err != nil {
			t.Fatal(err)
		}
	}
	backdate(old, waiting)
	prunable := func(id string) int {
		return d.int(`SELECT count(*) FROM checkpoint_history WHERE task_id = $1 AND reason = 'node'
			AND pending_interrupt_id IS NULL AND step > 0
			AND step < (SELECT max(step) FROM checkpoint_history WHERE task_id = $1)`, id)
	}
	want := prunable(old)
	if want < 5 {
		t.Fatalf("the old task has %d intermediate checkpoints; the test needs a longer history", want)
	}
	oldSteps, waitingSteps, recentSteps := p.steps(old), p.steps(waiting), p.steps(recent)
	oldEvents := p.eventCount(old)
	history := d.int("SELECT count(*) FROM checkpoint_history")

	code, out, errOut := cli(t, d.url, "", "prune", "--older-than", "720h", "--dry-run")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("would delete %d checkpoint_history rows of 1 tasks", want)) {
		t.Fatalf("prune --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	if n := d.int("SELECT count(*) FROM checkpoint_history"); n != history {
		t.Fatalf("the dry run deleted rows: %d → %d", history, n)
	}
	code, out, errOut = cli(t, d.url, "", "prune", "--older-than=720h")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("deleted %d checkpoint_history rows of 1 tasks", want)) {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
	}

	// The running server serves the pruned task: its first and last
	// checkpoints, the last with its state; a pruned step is 404.
	last := oldSteps[len(oldSteps)-1]
	if got := p.steps(old); !slices.Equal(got, []int{0, last}) {
		t.Errorf("checkpoints of the pruned task: %v, want [0 %d]", got, last)
	}
	var cp struct {
		Step  int            `json:"step"`
		State map[string]any `json:"state"`
	}
	if code := p.do("GET", fmt.Sprintf("/api/v1/tasks/%s/checkpoints/%d", old, last), nil, &cp); code != http.StatusOK ||
		cp.Step != last || len(cp.State) == 0 {
		t.Errorf("last checkpoint: status %d, %+v", code, cp)
	}
	if code := p.do("GET", fmt.Sprintf("/api/v1/tasks/%s/checkpoints/%d", old, oldSteps[1]), nil, nil); code != http.StatusNotFound {
		t.Errorf("a pruned checkpoint: status %d, want 404", code)
	}
	var task taskJSON
	if code := p.do("GET", "/api/v1/tasks/"+old, nil, &task); code != http.StatusOK || task.Status != "succeeded" {
		t.Errorf("the pruned task: status %d, %+v", code, task)
	}
	if n := p.eventCount(old); n != oldEvents {
		t.Errorf("events of the pruned task: %d, want %d", n, oldEvents)
	}
	if code, body := p.deskPage("/tasks/"+old, password); code != http.StatusOK || !strings.Contains(body, old) {
		t.Errorf("desk page of the pruned task: status %d\n%.2000s", code, body)
	}
	if got := p.steps(waiting); !slices.Equal(got, waitingSteps) {
		t.Errorf("the waiting task lost checkpoints: %v → %v", waitingSteps, got)
	}
	if got := p.steps(recent); !slices.Equal(got, recentSteps) {
		t.Errorf("the recent task lost checkpoints: %v → %v", recentSteps, got)
	}

	// A server with retention prunes at start (the recent task is old now).
	backdate(recent)
	want = prunable(recent)
	p2 := serve(t, d.url, "GATEHOUSE_WORKERS=0", "GATEHOUSE_HISTORY_RETENTION=720h")
	logged := fmt.Sprintf(`msg="pruned checkpoint history" component=retention rows=%d tasks=1 `, want)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p2.Logs(), logged) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", logged, p2.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := p2.steps(recent); !slices.Equal(got, []int{0, recentSteps[len(recentSteps)-1]}) {
		t.Errorf("checkpoints of the task the server pruned: %v", got)
	}
	if n := d.int("SELECT count(*) FROM audit_events WHERE kind = 'history.pruned' AND actor = 'retention'"); n != 1 {
		t.Errorf("%d history.pruned audit events by retention, want 1", n)
	}
	if n := d.int("SELECT count(*) FROM audit_events WHERE kind = 'history.pruned' AND actor = 'cli:ops'"); n != 1 {
		t.Errorf("%d history.pruned audit events by cli:ops, want 1", n)
	}
	if err := p2.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p2.Exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server with retention did not stop:\n%s", p2.Logs())
	}
	if p2.Err() != nil || !strings.Contains(p2.Logs(), `msg=stopped`) {
		t.Errorf("shutdown: %v\n%s", p2.Err(), p2.Logs())
	}
}

// TestE2EPruneNotifications: a server with the default retention (30
// days) prunes, at start, the deliveries that finished more than 30 days
// ago with their attempts, and the action links that ended then, and says
// how many; pending and recent rows stay. With GATEHOUSE_OUTBOX_RETENTION=0
// nothing is pruned.
func TestE2EPruneNotifications(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r := newReceiver(t, nil)
	r.setSecret(addWebhook(t, d.url, r.srv.URL+"/hook", "--events", "interrupt.raised"))
	const password = "retention-test-password"
	p := serve(t, d.url, append(webhookEnv, "GATEHOUSE_OUTBOX_RETENTION=0", "GATEHOUSE_WORKERS=2",
		"GATEHOUSE_ADMIN_PASSWORD="+password)...)
	const tasks = 3
	for i := range tasks {
		p.createFeature(map[string]any{"gates": map[string]any{}}, fmt.Sprintf("Notify me %d", i))
	}
	r.waitHooks(tasks, 60*time.Second)
	waitFor(t, func() bool { return d.int("SELECT count(*) FROM outbox WHERE state = 'delivered'") == tasks })
	if strings.Contains(p.Logs(), "notification retention") {
		t.Errorf("GATEHOUSE_OUTBOX_RETENTION=0 pruned:\n%s", p.Logs())
	}
	if code, page := p.deskPage("/admin/webhooks", password); code != http.StatusOK ||
		!strings.Contains(page, "Deliveries are kept until their endpoint is removed (GATEHOUSE_OUTBOX_RETENTION=0).") {
		t.Errorf("/admin/webhooks with retention 0: %d, no word of it", code)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := d.pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Two deliveries finished 40 days ago; the third is recent. A
	// pending one of the same age stays.
	exec(`UPDATE outbox SET created_at = now() - interval '40 days' WHERE id IN (SELECT id FROM outbox ORDER BY created_at LIMIT 2)`)
	exec(`UPDATE outbox_attempts a SET at = o.created_at FROM outbox o WHERE o.id = a.outbox_id`)
	exec(`INSERT INTO outbox (event, task_id, channel, state, created_at, next_at)
		SELECT 'task.succeeded', id, 'webhook', 'pending', now() - interval '50 days', now() + interval '1 day' FROM tasks LIMIT 1`)
	// Action links: one used 40 days ago, one expired 35 days ago, one
	// that ends in 72 h.
	exec(`INSERT INTO action_links (token_hash, interrupt_id, task_id, recipient, created_at, expires_at, used_at)
		SELECT sha256(i::text::bytea), x.id, x.task_id, 'alice', now() - interval '45 days',
		       now() + (CASE i WHEN 1 THEN -40 WHEN 2 THEN -35 ELSE 3 END) * interval '1 day',
		       CASE i WHEN 1 THEN now() - interval '40 days' END
		FROM (SELECT id, task_id FROM interrupts LIMIT 1) x, generate_series(1, 3) i`)
	oldAttempts := d.int(`SELECT count(*) FROM outbox_attempts a JOIN outbox o ON o.id = a.outbox_id
		WHERE o.created_at < now() - interval '30 days' AND o.state <> 'pending'`)
	if oldAttempts < 2 {
		t.Fatalf("%d attempts of the old deliveries", oldAttempts)
	}

	p2 := serve(t, d.url, append(webhookEnv, "GATEHOUSE_WORKERS=0", "GATEHOUSE_ADMIN_PASSWORD="+password)...)
	logged := fmt.Sprintf(`msg="pruned notification rows" component=retention deliveries=2 attempts=%d action_links=2 `, oldAttempts)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p2.Logs(), logged) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", logged, p2.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p2.Logs(), `msg="notification retention" retention=720h0m0s`) {
		t.Errorf("the default retention is not logged:\n%s", p2.Logs())
	}
	if n := d.int("SELECT count(*) FROM outbox WHERE state = 'delivered'"); n != tasks-2 {
		t.Errorf("%d delivered rows left, want %d", n, tasks-2)
	}
	if n := d.int("SELECT count(*) FROM outbox WHERE state = 'pending' AND event = 'task.succeeded'"); n != 1 {
		t.Errorf("the old pending delivery: %d rows, want 1", n)
	}
	if n := d.int("SELECT count(*) FROM outbox_attempts a WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = a.outbox_id)"); n != 0 {
		t.Errorf("%d attempts of pruned deliveries left", n)
	}
	if n := d.int("SELECT count(*) FROM action_links"); n != 1 {
		t.Errorf("%d action links left, want 1 (the one that has not ended)", n)
	}
	if code, page := p2.deskPage("/admin/webhooks", password); code != http.StatusOK ||
		!strings.Contains(page, "deleted with their attempts 30 days after they were last tried") {
		t.Errorf("/admin/webhooks with the default retention: %d, no word of it", code)
	}
}
