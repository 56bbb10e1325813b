package postgres_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// The counts kept by triggers (00052_row_counts.sql) are the counts of the
// rows, through creation, runs, gates, decisions, cancellation, deletion
// and folds.
func TestRowCountsFollowTheRows(t *testing.T) {
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(stage string) {
		t.Helper()
		want := map[string]int{}
		rows, err := pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			want[s] = n
		}
		got, err := store.TaskCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: task counts %v, want %v", stage, got, want)
		}
		wantP := map[string]int{}
		rows, err = pool.Query(ctx, `SELECT kind, count(*) FROM interrupts WHERE status = 'pending' GROUP BY kind`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			wantP[k] = n
		}
		gotP, err := store.PendingInterruptCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(gotP, wantP) {
			t.Errorf("%s: pending counts %v, want %v", stage, gotP, wantP)
		}
	}
	check("empty")
	var ids []string
	for range 6 {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	check("created")
	var itrs []*graph.Interrupt
	for _, id := range ids[:4] {
		out, err := e.Run(ctx, id, 0)
		if err != nil || out.Interrupt == nil {
			t.Fatalf("%+v %v", out, err)
		}
		itrs = append(itrs, out.Interrupt)
	}
	check("at the gate")
	// A fork of a task at its gate is inserted waiting, with the gate's
	// node current (its row written once, by the insert).
	snap, err := store.Load(ctx, ids[3])
	if err != nil {
		t.Fatal(err)
	}
	fork, err := e.Fork(ctx, graph.ForkRequest{TaskID: ids[3], Step: snap.Checkpoint.Step, CreatedBy: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	var status, current string
	var fences int
	if err := pool.QueryRow(ctx, `SELECT t.status, t.current_node, (t.lease_fence = c.lease_fence)::int
		FROM tasks t JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1`, fork.ID).Scan(&status, &current, &fences); err != nil {
		t.Fatal(err)
	}
	if status != "waiting" || current != itrs[3].Node || fences != 1 {
		t.Errorf("fork at a gate: status %s, current node %q (the gate's %q), fence copied %d", status, current, itrs[3].Node, fences)
	}
	check("forked")
	if err := store.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	check("folded")
	if _, err := e.Decide(ctx, ids[0], graph.DecisionInput{InterruptID: itrs[0].ID, Action: graph.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, ids[0], 0); err != nil {
		t.Fatal(err)
	}
	if err := store.Cancel(ctx, ids[1], "test"); err != nil {
		t.Fatal(err)
	}
	check("decided and cancelled")
	if _, err := pool.Exec(ctx, `DELETE FROM tasks WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	check("deleted")
	if err := store.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	check("folded again")
}
