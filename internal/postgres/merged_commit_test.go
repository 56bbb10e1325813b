package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// A decision applied while its node runs is held back and written in the
// node's commit: one transaction with two checkpoints, each in the
// history under its own step and reason, the decision's events first.
func TestDecisionCommitMergedIntoItsNodesCommit(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool := bd.pool
	// No node here outlasts the delay: every decision is merged.
	e := bd.engineOn(t, []graph.Workflow{graphtest.GateCycle()}, graph.WithStartCommitDelay(time.Hour))
	ctx := context.Background()
	task, itr := graphtest.RunToGate(t, e)
	for _, action := range []string{graph.ActionReject, graph.ActionApprove} {
		var before int
		if err := pool.QueryRow(ctx, `SELECT max(step) FROM checkpoint_history WHERE task_id = $1`, task.ID).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: action, Feedback: "again", DecidedBy: "ann"}); err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(ctx, task.ID, 0)
		if err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run after %s: %+v %v", action, out, err)
		}
		itr = out.Interrupt
		rows, err := pool.Query(ctx, `SELECT step, reason, xmin::text FROM checkpoint_history
			WHERE task_id = $1 AND step > $2 ORDER BY step`, task.ID, before)
		if err != nil {
			t.Fatal(err)
		}
		var steps []int
		var reasons, xids []string
		for rows.Next() {
			var step int
			var reason, xid string
			if err := rows.Scan(&step, &reason, &xid); err != nil {
				t.Fatal(err)
			}
			steps, reasons, xids = append(steps, step), append(reasons, reason), append(xids, xid)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(steps) != 2 || steps[0] != before+1 || steps[1] != before+2 || reasons[0] != "decision" || reasons[1] != "node" {
			t.Fatalf("history after %s: steps %v reasons %v, want %d decision, %d node", action, steps, reasons, before+1, before+2)
		}
		if xids[0] != xids[1] {
			t.Errorf("after %s: the decision's and the node's checkpoints were written by transactions %s and %s, want one", action, xids[0], xids[1])
		}
	}
	// The events stay gap-free and in order: each run starts its node
	// (held back with the decision) before the node completes.
	rows, err := pool.Query(ctx, `SELECT seq, type FROM task_events WHERE task_id = $1 ORDER BY seq`, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var want int64 = 1
	for rows.Next() {
		var seq int64
		var typ string
		if err := rows.Scan(&seq, &typ); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("seq %d where %d was due", seq, want)
		}
		want++
		types = append(types, typ)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i, typ := range types {
		if typ == graph.EventDecisionRecorded && (i+1 >= len(types) || types[i+1] != graph.EventNodeStarted) {
			t.Errorf("events %v: a decision is not followed by its node's start", types)
		}
	}
}

// A merged commit whose fence is stale writes nothing, neither part.
func TestMergedCommitWithALostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool, store := bd.pool, bd.store
	e := bd.engineOn(t, []graph.Workflow{graphtest.GateCycle()})
	ctx := context.Background()
	task, _ := graphtest.RunToGate(t, e)
	snap, err := store.Load(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_events WHERE task_id = $1) +
			(SELECT count(*) FROM checkpoint_history WHERE task_id = $1)`, task.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	was := count()
	cp := snap.Checkpoint
	first := cp
	first.Step++
	second := first
	second.Step++
	at := time.Now()
	c := &graph.Commit{TaskID: task.ID, Fence: snap.Task.Fence + 1, Status: graph.StatusRunning, Checkpoint: &second, Reason: "node",
		Events: []graph.Event{{Type: graph.EventNodeCompleted, Node: "b", At: at}},
		Before: &graph.Commit{TaskID: task.ID, Fence: snap.Task.Fence + 1, Status: graph.StatusRunning, Checkpoint: &first,
			Reason: "decision", Redoable: true, Events: []graph.Event{{Type: graph.EventNodeStarted, Node: "b", At: at}}}}
	if err := store.Commit(ctx, c); !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("merged commit under a stale fence: %v, want ErrLeaseLost", err)
	}
	if n := count(); n != was {
		t.Fatalf("%d events and history rows after a refused merged commit, want %d", n, was)
	}
	// A merged commit must be of one task and fence.
	c.Fence = snap.Task.Fence
	if err := store.Commit(ctx, c); err == nil || errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("merged commit with another fence before it: %v, want a refusal", err)
	}
	if n := count(); n != was {
		t.Fatalf("%d events and history rows after a refused merged commit, want %d", n, was)
	}
}

// A decision held back while its node runs is lost with the worker that
// held it (a crash before the node's commit): the task is taken over, the
// recorded decision is applied again, the approved node does not run
// again, and the lost worker's late commit writes nothing.
func TestHeldBackDecisionIsRedoneAfterTheWorkerIsLost(t *testing.T) {
	t.Parallel()
	type st struct{ A, B int }
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	runsOf := map[string]int{}
	node := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, run *graph.NodeRun, s st) (st, error) {
			mu.Lock()
			runsOf[name]++
			first := name == "b" && runsOf[name] == 1
			mu.Unlock()
			if first {
				close(stuck)
				<-release // the first worker never gets past here in time
			}
			run.Artifact(name+".md", "text/plain", name)
			if name == "a" {
				s.A++
			} else {
				s.B++
			}
			return s, nil
		}
	}
	g, err := graph.New[st]("held").Node("a", node("a")).Node("b", node("b")).
		Gate("a", graph.Gate[st]{Kind: "review", Artifact: "a.md", OnReject: func(s st, _ string, _ int) (st, error) { return s, nil }}).
		Edge("a", "b").Edge("b", graph.END).
		Init(func(json.RawMessage, graph.Options) (st, error) { return st{}, nil }).
		Result(func(s st) any { return s }).Compile()
	if err != nil {
		t.Fatal(err)
	}
	bd := setup(t)
	pool, store := bd.pool, bd.store
	e := bd.engineOn(t, []graph.Workflow{g}, graph.WithStartCommitDelay(time.Hour))
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "held", Options: []byte(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil || out.Interrupt == nil {
		t.Fatalf("run to the gate: %+v %v", out, err)
	}
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionApprove, DecidedBy: "ann"}); err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	go func() { _, err := e.Run(ctx, task.ID, 0); lost <- err }()
	<-stuck // the decision is applied in memory only, b runs
	var decisions int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM checkpoint_history WHERE task_id = $1 AND reason = 'decision'`, task.ID).Scan(&decisions); err != nil {
		t.Fatal(err)
	}
	if decisions != 0 {
		t.Fatalf("%d decision checkpoints written while b runs, want it held back", decisions)
	}
	// Another worker takes the task over (its lease is the decision's:
	// the task waits in the queue).
	claims, err := store.Claim(ctx, "replica-b", 1, time.Minute)
	if err != nil || len(claims) != 1 || claims[0].TaskID != task.ID {
		t.Fatalf("claim: %+v %v", claims, err)
	}
	out, err = e.Run(ctx, task.ID, claims[0].Fence)
	if err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("the second worker's run: %+v %v", out, err)
	}
	release <- struct{}{}
	if err := <-lost; !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("the lost worker's commit: %v, want ErrLeaseLost", err)
	}
	mu.Lock()
	a, b := runsOf["a"], runsOf["b"]
	mu.Unlock()
	if a != 1 || b != 2 {
		t.Errorf("a ran %d times and b %d, want the approved a once and b again after the loss", a, b)
	}
	var reasons []string
	rows, err := pool.Query(ctx, `SELECT reason FROM checkpoint_history WHERE task_id = $1 ORDER BY step`, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start", "node", "decision", "node"}; !slices.Equal(reasons, want) {
		t.Errorf("history %v, want %v", reasons, want)
	}
	var result string
	if err := pool.QueryRow(ctx, `SELECT result::text FROM tasks WHERE id = $1`, task.ID).Scan(&result); err != nil {
		t.Fatal(err)
	}
	if result != `{"A": 1, "B": 1}` {
		t.Errorf("result %s, want a and b once each in the state", result)
	}
}

// A running task's row is not rewritten by each node's commit: the seq
// lives on the checkpoint row, and the row is written when the task
// changes status, or when it was last written longer ago than a second
// (its current node then catches up). A claim writes the row: the run's
// first commit leaves it alone too. A run that was not claimed (the row
// says queued) writes it with its first commit.
func TestQuietCommitsLeaveTheTaskRow(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool, store := bd.pool, bd.store
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	type st struct{ N int }
	var seen []string // the task row's version, current node and status, as each node starts
	var id string
	slow := true
	node := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, _ *graph.NodeRun, s st) (st, error) {
			var xmin, current, status string
			if err := pool.QueryRow(ctx, `SELECT xmin::text, current_node, status FROM tasks WHERE id = $1`, id).Scan(&xmin, &current, &status); err != nil {
				return s, err
			}
			seen = append(seen, xmin+" "+current+" "+status)
			if name == "c" && slow {
				mu.Lock()
				now = now.Add(2 * time.Second) // c is slow
				mu.Unlock()
			}
			s.N++
			return s, nil
		}
	}
	g, err := graph.New[st]("quiet").Node("a", node("a")).Node("b", node("b")).Node("c", node("c")).Node("d", node("d")).
		Edge("a", "b").Edge("b", "c").Edge("c", "d").Edge("d", graph.END).
		Init(func(json.RawMessage, graph.Options) (st, error) { return st{}, nil }).Compile()
	if err != nil {
		t.Fatal(err)
	}
	e := bd.engineOn(t, []graph.Workflow{g}, graph.WithClock(clock), graph.WithStartCommitDelay(time.Hour))
	var fence int64
	id, fence = createClaimed(t, e, store, "quiet")
	out, err := e.Run(ctx, id, fence)
	if err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("run: %+v %v", out, err)
	}
	field := func(i, f int) string { return strings.Fields(seen[i])[f] }
	// The claim wrote the row; the run's first commit (a's start with
	// its end, and b's start) and b's leave it alone; c's comes more than
	// a second after the claim and writes it (d is current).
	if field(1, 0) != field(0, 0) || field(2, 0) != field(1, 0) || field(2, 2) != "running" {
		t.Errorf("the task row was rewritten by a quiet commit: %v", seen)
	}
	if field(3, 0) == field(2, 0) || field(3, 1) != "d" {
		t.Errorf("a commit more than a second after the row's last write left it alone: %v", seen)
	}
	var events, last int64
	var status string
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_events WHERE task_id = $1), c.event_seq, t.status
		FROM tasks t JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1`, id).Scan(&events, &last, &status); err != nil {
		t.Fatal(err)
	}
	if events != last || status != "succeeded" {
		t.Errorf("%d events, the counter at %d, status %s", events, last, status)
	}

	// Not claimed: the row says queued until the run's first commit.
	seen, slow = nil, false
	task, err := e.Create(ctx, graph.NewTask{Workflow: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	id = task.ID
	if out, err := e.Run(ctx, id, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("unclaimed run: %+v %v", out, err)
	}
	if field(0, 2) != "queued" || field(1, 2) != "running" || field(1, 1) != "b" {
		t.Errorf("an unclaimed run's first commit left the task row alone: %v", seen)
	}
}

// A node that runs longer than the start delay after a quiet commit
// announced it brings the task row up to it (graph.Toucher): the first slow
// node after quick ones (the run's touch timer already running), and the
// slow node after it (the timer armed again).
func TestLongNodeTouchesTheTaskRow(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool, store := bd.pool, bd.store
	ctx := context.Background()
	type st struct{ N int }
	var id string
	shown := make(chan string, 2)
	quick := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) { s.N++; return s, nil }
	slow := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, _ *graph.NodeRun, s st) (st, error) {
			var node string
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
				if err := pool.QueryRow(ctx, `SELECT current_node FROM tasks WHERE id = $1`, id).Scan(&node); err != nil {
					return s, err
				}
				if node == name {
					break
				}
			}
			shown <- node
			s.N++
			return s, nil
		}
	}
	g, err := graph.New[st]("touch").Node("a", quick).Node("b", quick).Node("slow", slow("slow")).
		Node("slower", slow("slower")).
		Edge("a", "b").Edge("b", "slow").Edge("slow", "slower").Edge("slower", graph.END).
		Init(func(json.RawMessage, graph.Options) (st, error) { return st{}, nil }).Compile()
	if err != nil {
		t.Fatal(err)
	}
	e := bd.engineOn(t, []graph.Workflow{g}, graph.WithStartCommitDelay(5*time.Millisecond))
	var fence int64
	id, fence = createClaimed(t, e, store, "touch")
	if out, err := e.Run(ctx, id, fence); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("run: %+v %v", out, err)
	}
	for _, want := range []string{"slow", "slower"} {
		if node := <-shown; node != want {
			t.Fatalf("while %s ran the task row said %q", want, node)
		}
	}
}

// createClaimed creates a task of workflow and claims it, as a worker
// does before it runs a task: its row says running.
func createClaimed(t *testing.T, e *graph.Engine, store *postgres.Store, workflow string) (id string, fence int64) {
	t.Helper()
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: workflow})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := store.ClaimTask(ctx, "w", task.ID, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %+v %v", claims, err)
	}
	return task.ID, claims[0].Fence
}

// A quiet commit merged ahead of one that writes the task row takes the
// task row's lock first, as every writer that locks both rows does: a
// cancel that has locked the task row and then updates the checkpoint row
// (its counter, the fence's copy) finds the checkpoint row free, and the
// merged commit, once the cancel is through, finds the fence moved and
// writes nothing. Locked the other way round, the two deadlocked.
func TestMergedQuietCommitLocksTheTaskRowFirst(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool, store := bd.pool, bd.store
	ctx := context.Background()
	e := bd.engineOn(t, []graph.Workflow{graphtest.Linear(3)})
	id, fence := createClaimed(t, e, store, "linear")
	snap, err := store.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	at := func(step int) *graph.Checkpoint {
		cp := snap.Checkpoint
		cp.Step, cp.UpdatedAt = step, time.Now()
		return &cp
	}
	ev := func(typ string) []graph.Event {
		return []graph.Event{{Type: typ, Node: "n1", Iteration: 1, At: time.Now()}}
	}
	before := &graph.Commit{TaskID: id, Fence: fence, Status: graph.StatusRunning, Quiet: true, Reason: "decision",
		Checkpoint: at(snap.Checkpoint.Step + 1), Events: ev(graph.EventNodeStarted)}
	c := &graph.Commit{TaskID: id, Fence: fence, Status: graph.StatusRunning, CurrentNode: "n2", Reason: "node",
		Checkpoint: at(snap.Checkpoint.Step + 2), Events: ev(graph.EventNodeCompleted), Before: before}

	// The cancel's first half: the task row locked.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- store.Commit(ctx, c) }()
	// Until the commit waits for a lock.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the merged commit never waited for the task row")
		}
	}
	// Its second half: the checkpoint row, then the fence. Were the
	// checkpoint row held by the merged commit, this would wait for it
	// while it waits for the task row.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE workflow_checkpoints SET event_seq = event_seq + 1 WHERE task_id = $1`, id); err != nil {
		t.Fatalf("the cancel's update of the checkpoint row: %v", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET lease_fence = lease_fence + 1, status = 'cancelled' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("the merged commit after the cancel: %v, want ErrLeaseLost", err)
	}
	var steps int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM checkpoint_history WHERE task_id = $1 AND step > $2`,
		id, snap.Checkpoint.Step).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if steps != 0 {
		t.Errorf("%d checkpoints written by a commit whose lease was lost", steps)
	}
}

// A claim locks the task row as an update that leaves its key alone (FOR
// NO KEY UPDATE): the foreign-key checks of a quiet commit in flight, which
// take a key share lock on the task row after the commit has locked the
// checkpoint row, pass it, and the claim's fence copy waits for the commit
// instead of both waiting for each other.
func TestClaimLetsForeignKeyChecksThrough(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	pool, store := bd.pool, bd.store
	ctx := context.Background()
	e := bd.engineOn(t, []graph.Workflow{graphtest.Linear(3)})
	id, _ := createClaimed(t, e, store, "linear")
	if _, err := pool.Exec(ctx, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for name, claim := range map[string]func(q *dbsqlc.Queries) (int, error){
		"TaskClaim": func(q *dbsqlc.Queries) (int, error) {
			rows, err := q.TaskClaim(ctx, dbsqlc.TaskClaimParams{Owner: "w2", TtlSeconds: 60, MaxTasks: 1})
			return len(rows), err
		},
		"TaskClaimOne": func(q *dbsqlc.Queries) (int, error) {
			rows, err := q.TaskClaimOne(ctx, dbsqlc.TaskClaimOneParams{Owner: "w2", TtlSeconds: 60, ID: uuid.MustParse(id)})
			return len(rows), err
		},
	} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := claim(dbsqlc.New(tx)); err != nil || n != 1 {
			t.Fatalf("%s: %d claimed, %v", name, n, err)
		}
		// A foreign-key check's lock, while the claim is not committed.
		if _, err := pool.Exec(ctx, `BEGIN; SET LOCAL lock_timeout = '2s'; SELECT 1 FROM tasks WHERE id = '`+id+`' FOR KEY SHARE; COMMIT`); err != nil {
			t.Errorf("a key share lock on the row of a task %s claimed: %v", name, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
