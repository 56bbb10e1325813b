package timekeeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/timekeeper"
)

// The store the server runs on is the keeper's.
var _ timekeeper.Store = (*postgres.Store)(nil)

type bundle struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *graph.Engine
}

// setup: a database, a store (with opts, if given) and an engine over the
// gate cycle whose interrupts get timers from hook.
func setup(t *testing.T, hook func(*graph.Task, *graph.Interrupt), opts ...postgres.Options) *bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	var o postgres.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	store := postgres.NewStore(pool, o)
	engine, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()}, graph.WithRaiseHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, store: store, engine: engine}
}

// waiting makes n tasks waiting at their first gate.
func (b *bundle) waiting(t *testing.T, n int, creator string) []*graph.Interrupt {
	t.Helper()
	ctx := context.Background()
	out := make([]*graph.Interrupt, 0, n)
	for range n {
		task, err := b.engine.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`), CreatedBy: creator})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.engine.Run(ctx, task.ID, task.Fence)
		if err != nil || res.Interrupt == nil {
			t.Fatalf("run: %+v %v", res, err)
		}
		out = append(out, res.Interrupt)
	}
	return out
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func policyFile(t *testing.T, text string) auth.Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := auth.LoadPolicy(auth.PolicySources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDecisionRacesDeadline: 200 interrupts whose deadline (on_timeout
// fail) falls due while a decision on each is in flight: each ends one way
// only — decided (resolved, a decision row, no expiry) or expired (the
// decision refused with a conflict, the task failed) — never both.
func TestDecisionRacesDeadline(t *testing.T) {
	t.Parallel()
	const n = 200
	far := time.Now().Add(time.Hour)
	b := setup(t, func(_ *graph.Task, itr *graph.Interrupt) {
		itr.Deadline = &far
		itr.Timers = []graph.Timer{{What: graph.TimerDeadline, DueAt: far, Action: auth.OnTimeoutFail}}
	})
	itrs := b.waiting(t, n, "ann")
	ctx := context.Background()
	// Every deadline falls due now, and the keepers and the deciders start
	// together.
	if _, err := b.pool.Exec(ctx, "UPDATE interrupt_timers SET due_at = now()"); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	decided := make([]error, n)
	for i, itr := range itrs {
		wg.Go(func() {
			<-start
			_, decided[i] = b.engine.Decide(ctx, itr.TaskID, graph.DecisionInput{InterruptID: itr.ID,
				Action: graph.ActionApprove, DecidedBy: "bob"})
		})
	}
	for range 3 {
		wg.Go(func() {
			<-start
			for {
				k, err := b.store.FireTimers(ctx, 7, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if k == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	var won, lost int
	for i, itr := range itrs {
		var status string
		if err := b.pool.QueryRow(ctx, "SELECT status FROM interrupts WHERE id = $1", itr.ID).Scan(&status); err != nil {
			t.Fatal(err)
		}
		decisions := b.count(t, "SELECT count(*) FROM decisions WHERE interrupt_id = $1", itr.ID)
		expired := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'interrupt.expired' AND data->>'interrupt_id' = $1", itr.ID)
		recorded := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'decision.recorded' AND task_id = $1", itr.TaskID)
		var ce *graph.ConflictError
		switch {
		case decided[i] == nil && status == graph.InterruptResolved && decisions == 1 && expired == 0 && recorded == 1:
			won++
		case errors.As(decided[i], &ce) && ce.Status == graph.InterruptExpired && status == graph.InterruptExpired &&
			decisions == 0 && expired == 1 && recorded == 0:
			lost++
		default:
			t.Errorf("interrupt %d: decision %v, status %s, %d decisions, %d expiries, %d decision events",
				i, decided[i], status, decisions, expired, recorded)
		}
	}
	if left := b.count(t, "SELECT count(*) FROM interrupt_timers"); left != 0 {
		t.Errorf("%d timers left", left)
	}
	t.Logf("decisions won %d, deadlines won %d", won, lost)
}

// TestTwoKeepersFireEachOnce: 50 deadlines due in the same second, two
// keepers on two stores (two replicas): each expires exactly once.
func TestTwoKeepersFireEachOnce(t *testing.T) {
	t.Parallel()
	due := time.Now().Add(1500 * time.Millisecond)
	b := setup(t, func(_ *graph.Task, itr *graph.Interrupt) {
		itr.Deadline = &due
		itr.Timers = []graph.Timer{{What: graph.TimerDeadline, DueAt: due, Action: auth.OnTimeoutCancel}}
	})
	b.waiting(t, 50, "ann")
	other := postgres.NewStore(b.pool, postgres.Options{})
	k1 := timekeeper.New(b.store, auth.DefaultPolicy(), nil)
	k2 := timekeeper.New(other, auth.DefaultPolicy(), nil)
	k1.Start()
	k2.Start()
	defer k1.Stop()
	defer k2.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for b.count(t, "SELECT count(*) FROM tasks WHERE status = 'cancelled'") < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 50 cancelled", b.count(t, "SELECT count(*) FROM tasks WHERE status = 'cancelled'"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'interrupt.expired'"); n != 50 {
		t.Errorf("%d interrupt.expired events, want 50", n)
	}
	if n := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'task.cancelled' AND data->>'actor' = 'system'"); n != 50 {
		t.Errorf("%d task.cancelled events by system, want 50", n)
	}
	// The counts move after the commits the test saw: stop first.
	k1.Stop()
	k2.Stop()
	f1, _ := k1.Stats()
	f2, _ := k2.Stats()
	if f1+f2 != 50 {
		t.Errorf("keepers fired %d + %d timers, want 50 in all", f1, f2)
	}
}

// TestOnTimeout: each on_timeout, fired by the store.
func TestOnTimeout(t *testing.T) {
	t.Parallel()
	for _, action := range []string{auth.OnTimeoutFail, auth.OnTimeoutApprove, auth.OnTimeoutCancel, auth.OnTimeoutNone} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(_ *graph.Task, itr *graph.Interrupt) {
				due := itr.CreatedAt.Add(time.Second)
				itr.Deadline = &due
				itr.Timers = []graph.Timer{{What: graph.TimerDeadline, DueAt: due, Action: action}}
			})
			itr := b.waiting(t, 1, "ann")[0]
			ctx := context.Background()
			time.Sleep(time.Until(itr.Deadline.Add(100 * time.Millisecond)))
			if n, err := b.store.FireTimers(ctx, 10, nil); err != nil || n != 1 {
				t.Fatalf("FireTimers: %d %v", n, err)
			}
			if n, err := b.store.FireTimers(ctx, 10, nil); err != nil || n != 0 {
				t.Fatalf("a second FireTimers fired %d %v", n, err)
			}
			task, err := b.store.Task(ctx, itr.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.store.Interrupt(ctx, itr.ID)
			if err != nil {
				t.Fatal(err)
			}
			expired := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'interrupt.expired' AND data->>'actor' = 'system'")
			overdue := b.count(t, "SELECT count(*) FROM task_events WHERE type = 'interrupt.overdue' AND data->>'actor' = 'system'")
			_, decideErr := b.engine.Decide(ctx, itr.TaskID, graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionApprove, DecidedBy: "bob"})
			switch action {
			case auth.OnTimeoutFail:
				want := "deadline passed: review at a waited 1s"
				if task.Status != graph.StatusFailed || task.Error != want {
					t.Errorf("task %s %q, want failed %q", task.Status, task.Error, want)
				}
				// A retry raises a fresh interrupt at the same gate,
				// decidable, with its own deadline: not the expired one.
				if err := b.store.Retry(ctx, itr.TaskID, "ann"); err != nil {
					t.Fatalf("retry: %v", err)
				}
				retried, err := b.store.Task(ctx, itr.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				res, err := b.engine.Run(ctx, itr.TaskID, retried.Fence)
				if err != nil || res.Interrupt == nil || res.Interrupt.ID == itr.ID || res.Interrupt.Node != itr.Node ||
					res.Interrupt.Status != graph.InterruptPending || res.Interrupt.Deadline == nil {
					t.Fatalf("after retry: %+v %v", res, err)
				}
				if _, err := b.engine.Decide(ctx, itr.TaskID, graph.DecisionInput{InterruptID: res.Interrupt.ID,
					Action: graph.ActionApprove, DecidedBy: "bob"}); err != nil {
					t.Errorf("deciding the fresh interrupt: %v", err)
				}
			case auth.OnTimeoutCancel:
				if task.Status != graph.StatusCancelled {
					t.Errorf("task %s, want cancelled", task.Status)
				}
			case auth.OnTimeoutApprove:
				if task.Status != graph.StatusQueued {
					t.Errorf("task %s, want queued (approved by system)", task.Status)
				}
				ds, _ := b.store.Decisions(ctx, itr.TaskID)
				if len(ds) != 1 || ds[0].DecidedBy != "system" || ds[0].Action != graph.ActionApprove || ds[0].PayloadSHA256 != itr.PayloadSHA256 {
					t.Errorf("decisions: %+v", ds)
				}
				// The task continues as on approval: to the next gate.
				res, err := b.engine.Run(ctx, itr.TaskID, task.Fence)
				if err != nil || res.Interrupt == nil || res.Interrupt.Node != "b" {
					t.Errorf("after system's approval: %+v %v", res, err)
				}
			}
			if action == auth.OnTimeoutNone {
				if got.Status != graph.InterruptPending || !got.Overdue || overdue != 1 || expired != 0 {
					t.Errorf("none: status %s overdue %v, %d overdue events, %d expiries", got.Status, got.Overdue, overdue, expired)
				}
				if decideErr != nil {
					t.Errorf("an overdue interrupt stays decidable: %v", decideErr)
				}
				return
			}
			if got.Status != graph.InterruptExpired || expired != 1 {
				t.Errorf("status %s, %d expiries", got.Status, expired)
			}
			var ce *graph.ConflictError
			if !errors.As(decideErr, &ce) || ce.Status != graph.InterruptExpired {
				t.Errorf("decision after expiry: %v", decideErr)
			}
		})
	}
}

// TestRemindersAndEscalation: reminders and escalation steps are events,
// once each; escalation lets the added group decide.
func TestRemindersAndEscalation(t *testing.T) {
	t.Parallel()
	pol := policyFile(t, `groups: {leads: [alice]}
kinds:
  review:
    deciders: [user:carol]
    deadline: 1h
    reminders: [59m59s, 30m]
    escalate: [{after: 1s, to: [group:leads]}]
`)
	b := setup(t, pol.Schedule)
	ctx := context.Background()
	svc := auth.NewService(auth.Config{Store: b.store})
	for _, name := range []string{"carol", "bob"} {
		if _, err := svc.AddUser(ctx, "test", name, "a long enough password", auth.RoleApprover, nil); err != nil {
			t.Fatal(err)
		}
	}
	itr := b.waiting(t, 1, "ann")[0]
	if itr.Deadline == nil || len(itr.Timers) != 4 {
		t.Fatalf("schedule: %+v", itr)
	}
	d := auth.NewDecider(b.engine, b.store, pol, nil)
	alice := auth.Principal{Name: "alice", Role: auth.RoleApprover}
	task, _ := b.store.Task(ctx, itr.TaskID)
	if err := d.MayDecide(alice, task, itr); err == nil {
		t.Fatal("alice decided before the escalation")
	}
	k := timekeeper.New(b.store, pol, nil)
	k.Start()
	defer k.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for b.count(t, "SELECT count(*) FROM task_events WHERE type IN ('interrupt.reminder', 'interrupt.escalated')") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no reminder and escalation within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.Stop()
	var data string
	if err := b.pool.QueryRow(ctx, "SELECT data::text FROM task_events WHERE type = 'interrupt.escalated'").Scan(&data); err != nil {
		t.Fatal(err)
	}
	if want := `"added": ["group:leads"]`; !contains(data, want) || !contains(data, `"level": 1`) || !contains(data, `"actor": "system"`) {
		t.Errorf("escalated data %s", data)
	}
	if err := b.pool.QueryRow(ctx, "SELECT data::text FROM task_events WHERE type = 'interrupt.reminder'").Scan(&data); err != nil {
		t.Fatal(err)
	}
	if !contains(data, `"offset": "59m59s"`) || !contains(data, `"to": ["carol"]`) {
		t.Errorf("reminder data %s", data)
	}
	if n := b.count(t, "SELECT count(*) FROM interrupt_timers"); n != 2 {
		t.Errorf("%d timers left, want 2 (the other reminder and the deadline)", n)
	}
	got, err := b.store.Interrupt(ctx, itr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.EscalationLevel != 1 {
		t.Fatalf("level %d", got.EscalationLevel)
	}
	if _, err := d.Decide(ctx, alice, itr.TaskID, graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionApprove}); err != nil {
		t.Errorf("alice after the escalation: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestTimerNoticeAudience: whom the email notices of reminders and
// escalations are written to, by the policy at the interrupt's level. The
// review needs two approvals of role:admin, alice and ann; ann created
// the task (separation of duties: never mailed); alice approved first.
// Escalation 1 adds group:leads (lena; vic is a viewer), escalation 2
// role:approver (zed; nomail has no address, gone is disabled).
func TestTimerNoticeAudience(t *testing.T) {
	t.Parallel()
	pol := policyFile(t, `groups: {leads: [lena, vic]}
kinds:
  review:
    approvals: 2
    separation_of_duties: true
    deciders: [role:admin, user:alice, user:ann]
    deadline: 1h
    reminders: [50m, 10m]
    escalate: [{after: 20m, to: [group:leads]}, {after: 30m, to: [role:approver]}]
`)
	b := setup(t, pol.Schedule, postgres.Options{Outbox: postgres.Outbox{Email: true, Audience: postgres.PolicyAudience(pol)}})
	ctx := context.Background()
	svc := auth.NewService(auth.Config{Store: b.store})
	for _, u := range []struct {
		name  string
		role  auth.Role
		email string
	}{{"ann", auth.RoleApprover, "ann@x"}, {"alice", auth.RoleApprover, "alice@x"}, {"root", auth.RoleAdmin, "root@x"},
		{"lena", auth.RoleApprover, "lena@x"}, {"vic", auth.RoleViewer, "vic@x"}, {"zed", auth.RoleApprover, "zed@x"},
		{"nomail", auth.RoleApprover, ""}, {"gone", auth.RoleApprover, "gone@x"}} {
		if _, err := svc.AddUserWithEmail(ctx, "test", u.name, "a long enough password", u.role, nil, u.email); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.DisableUser(ctx, "test", "gone"); err != nil {
		t.Fatal(err)
	}
	itr := b.waiting(t, 1, "ann")[0]
	mailed := func(event string) []string {
		t.Helper()
		rows, err := b.pool.Query(ctx, `SELECT recipient FROM outbox WHERE channel = 'email' AND event = $1 ORDER BY recipient`, event)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `DELETE FROM outbox WHERE event = $1`, event); err != nil {
			t.Fatal(err)
		}
		return names
	}
	if got := mailed("interrupt.raised"); !slices.Equal(got, []string{"alice", "root"}) {
		t.Errorf("raised: mailed %v, want [alice root]", got)
	}
	d := auth.NewDecider(b.engine, b.store, pol, nil)
	out, err := d.Decide(ctx, auth.Principal{Name: "alice", Role: auth.RoleApprover, Kind: auth.KindUser}, itr.TaskID,
		graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionApprove})
	if err != nil || !out.Pending() {
		t.Fatalf("alice's approval: %+v %v", out, err)
	}
	k := timekeeper.New(b.store, pol, nil)
	k.Start()
	defer k.Stop()
	fire := func(what string, step int, event string) []string {
		t.Helper()
		if _, err := b.pool.Exec(ctx, `UPDATE interrupt_timers SET due_at = now() WHERE interrupt_id = $1 AND what = $2 AND step = $3`,
			itr.ID, what, step); err != nil {
			t.Fatal(err)
		}
		k.Poke(time.Time{})
		deadline := time.Now().Add(10 * time.Second)
		for b.count(t, `SELECT count(*) FROM interrupt_timers WHERE interrupt_id = $1 AND what = $2 AND step = $3`, itr.ID, what, step) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d did not fire", what, step)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return mailed(event)
	}
	for _, c := range []struct {
		what  string
		step  int
		event string
		want  []string
		to    string // a reminder's data.to: the deciders who have not decided, by name
	}{
		{"reminder", 1, "interrupt.reminder", []string{"root"}, `["root"]`},                                         // level 0, less alice (approved) and ann (SoD)
		{"escalate", 1, "interrupt.escalated", []string{"lena"}, ""},                                                // not vic, a viewer
		{"escalate", 2, "interrupt.escalated", []string{"zed"}, ""},                                                 // role:approver: not ann, nomail, gone
		{"reminder", 2, "interrupt.reminder", []string{"lena", "root", "zed"}, `["lena", "nomail", "root", "zed"]`}, // level 2; nomail is named, not mailed
	} {
		if got := fire(c.what, c.step, c.event); !slices.Equal(got, c.want) {
			t.Errorf("%s %d: mailed %v, want %v", c.what, c.step, got, c.want)
		}
		if c.to == "" {
			continue
		}
		var to string
		if err := b.pool.QueryRow(ctx, `SELECT (data->'to')::text FROM task_events WHERE type = 'interrupt.reminder' ORDER BY seq DESC LIMIT 1`).Scan(&to); err != nil {
			t.Fatal(err)
		}
		if to != c.to {
			t.Errorf("%s %d: data.to %s, want %s", c.what, c.step, to, c.to)
		}
	}
}
