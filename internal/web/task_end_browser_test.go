package web

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/timekeeper"
)

// TestTaskPageShowsTheEnd (issue 27, item 2): a task that ends without a
// person — its deadline fails, approves or cancels it, or someone cancels
// it from elsewhere — shows that end on its page, whether the page was open
// at the time or opened after (once the socket has caught up too): the
// status, no decision form of the ended interrupt, and the inbox count
// without it. The page opened after is one the desk had followed before
// (its snapshot cached), which is how a stale "waiting" came back.
func TestTaskPageShowsTheEnd(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	keeper := timekeeper.New(env.store, env.policy, env.log)
	keeper.Start()
	t.Cleanup(keeper.Stop)
	ctx := context.Background()

	// deadline makes the task's pending interrupt's deadline fall due now
	// with action, and lets the keeper fire it.
	deadline := func(itr *graph.Interrupt, action string) {
		t.Helper()
		if _, err := env.pool.Exec(ctx, `UPDATE interrupts SET deadline_at = now() WHERE id = $1`, itr.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := env.pool.Exec(ctx, `INSERT INTO interrupt_timers (interrupt_id, task_id, what, step, due_at, action)
			VALUES ($1, $2, 'deadline', 0, now(), $3)`, itr.ID, itr.TaskID, action); err != nil {
			t.Fatal(err)
		}
		keeper.Poke(time.Time{})
	}
	cancel := func(itr *graph.Interrupt, _ string) {
		t.Helper()
		if err := env.store.Cancel(ctx, itr.TaskID, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		end    func(*graph.Interrupt, string)
		action string
		status string // the task's status after
		next   string // the kind of the interrupt pending after ("" none)
	}{
		{"DeadlineFails", deadline, "fail", "failed", ""},
		{"DeadlineApproves", deadline, "approve", "waiting", "plan"},
		{"DeadlineCancels", deadline, "cancel", "cancelled", ""},
		{"CancelledElsewhere", cancel, "", "cancelled", ""},
	}
	b := env.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(1366, 900))
	// The badge counts every pending interrupt of the desk: one task that
	// stays waiting keeps it from being zero by chance.
	other := env.createFeature("Stays waiting")
	env.waitPending(other, "prd")
	shows := func(id string, status, next string) {
		t.Helper()
		want := 1
		if next != "" {
			want = 2
		}
		cond := `document.querySelector("main[data-task]") && document.querySelector("main").dataset.taskStatus === ` + jsq(status) +
			` && !document.querySelector(` + jsq(pendingSel("prd")) + `)` +
			` && document.getElementById("nav-inbox-count").getAttribute("aria-label") === ` + jsq(strconv.Itoa(want)+" pending")
		if next != "" {
			cond += ` && !!document.querySelector(` + jsq(pendingSel(next)) + `)`
		}
		b.waitJS(cond, 20*time.Second)
		b.liveOpen()
		// The socket's catch-up has come: the page still shows the end.
		time.Sleep(700 * time.Millisecond)
		if !eval[bool](b, cond) {
			t.Errorf("after the socket caught up the page shows status %q, prd form %v, badge %q",
				eval[string](b, `document.querySelector("main").dataset.taskStatus`),
				eval[bool](b, `!!document.querySelector(`+jsq(pendingSel("prd"))+`)`),
				eval[string](b, `document.getElementById("nav-inbox-count").getAttribute("aria-label")`))
		}
	}
	for _, c := range cases {
		// Open at the time: the page follows the end live.
		id := env.createFeature("Open at the time: " + c.name)
		itr := env.waitPending(id, "prd")
		b.do(chromedp.Navigate(env.base + "/tasks/" + id))
		b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 20*time.Second)
		b.liveOpen()
		c.end(itr, c.action)
		shows(id, c.status, c.next)
		b.screenshot(c.name + "-open")
		if c.next != "" {
			cancel(env.waitPending(id, c.next), "")
		}

		// Opened after: the page was followed before (the desk cached
		// it), left, and the task ended meanwhile.
		id = env.createFeature("Opened after: " + c.name)
		itr = env.waitPending(id, "prd")
		b.do(chromedp.Navigate(env.base + "/tasks/" + id))
		b.waitJS(`document.querySelector(`+jsq(pendingSel("prd"))+`)`, 20*time.Second)
		b.liveOpen()
		b.do(chromedp.Navigate(env.base + "/inbox"))
		b.waitJS(`document.querySelector(".inbox-item")`, 10*time.Second)
		time.Sleep(300 * time.Millisecond) // the task's feed stops
		c.end(itr, c.action)
		if c.next != "" {
			env.waitPending(id, c.next)
		} else {
			waitStatus(t, env, id, c.status)
		}
		b.do(chromedp.Navigate(env.base + "/tasks/" + id))
		shows(id, c.status, c.next)
		b.screenshot(c.name + "-after")
		if c.next != "" {
			cancel(env.waitPending(id, c.next), "")
		}
	}
}

// waitStatus waits until the task has status.
func waitStatus(t *testing.T, env *bundle, id, status string) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		task, err := env.store.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if string(task.Status) == status {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s never %s", id, status)
}
