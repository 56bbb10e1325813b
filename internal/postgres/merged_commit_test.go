package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/graph"
	"github.com/gatehousehq/gatehouse/internal/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// A decision applied while its node runs is held back and written in the
// node's commit: one transaction with two checkpoints, each in the
// history under its own step and reason, the decision's events first.
func TestDecisionCommitMergedIntoItsNodesCommit(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool)
	// No node here outlasts the delay: every decision is merged.
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()}, graph.WithStartCommitDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
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
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool)
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
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
