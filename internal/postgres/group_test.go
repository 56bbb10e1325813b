package postgres_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Commits of several tasks that queue up while the store is busy travel as
// one batch; one of them carrying a stale fence fails alone, writing
// nothing, and the others are committed.
func TestGroupCommitIsolatesLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	const stale = 3
	if _, err := b.pool.Exec(ctx, "UPDATE tasks SET lease_fence = 7 WHERE id = $1", ids[stale]); err != nil {
		t.Fatal(err)
	}
	eventsOf := func(id string) int {
		var c int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM task_events WHERE task_id = $1", id).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	staleEvents := eventsOf(ids[stale])
	before := store.CommitStats()

	pending, release := postgres.HoldCommits(store)
	outs := make([]graph.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = e.Run(ctx, id, 0)
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); pending() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d commits queued", pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()

	for i := range ids {
		if i == stale {
			if !errors.Is(errs[i], graph.ErrLeaseLost) {
				t.Errorf("task with the stale fence: %v, want ErrLeaseLost", errs[i])
			}
			continue
		}
		if errs[i] != nil || outs[i].Status != graph.StatusWaiting {
			t.Errorf("task %d: %+v %v, want waiting at its gate", i, outs[i], errs[i])
		}
	}
	if got := eventsOf(ids[stale]); got != staleEvents {
		t.Errorf("the stale writer wrote %d events", got-staleEvents)
	}
	// The group failed (the stale commit aborted it) and each of its
	// commits was sent again alone.
	if after := store.CommitStats(); after.Splits-before.Splits != 1 {
		t.Errorf("split batches: %d, want 1 (stats %+v)", after.Splits-before.Splits, after)
	}
}

// An idle store sends a commit at once, alone.
func TestGroupCommitIdleSendsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(context.Background(), graph.NewTask{Workflow: "counter"}); err != nil {
		t.Fatal(err)
	}
	if st := store.CommitStats(); st.Batches != 1 || st.Commits != 1 || st.Splits != 0 {
		t.Fatalf("stats %+v; want one batch of one commit", st)
	}
}

// A commit sent for a context that cannot end (the engine's) is still
// bounded: when PostgreSQL does not answer in time (here the task's row is
// locked by another transaction), it fails, its connection is dropped, and
// the task runs on afterwards. As after a cancelled context, the statement
// already sent may still commit on the server once the lock is gone (pgx's
// default on cancel is the same deadline, without a cancel request); the
// fence and the checkpoint's keys make either outcome safe.
func TestCommitWithoutCancelIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := postgres.NewStore(b.pool, postgres.Options{})
	postgres.SetCommitTimeout(store, 300*time.Millisecond)
	e, err := graph.NewEngine(store, []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Create(ctx, graph.NewTask{Workflow: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", task.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = e.Run(ctx, task.ID, 0)
	took := time.Since(start)
	if err == nil {
		t.Fatal("run committed through a locked task row")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || took < 300*time.Millisecond || took > 10*time.Second {
		t.Fatalf("run failed after %v (%v); want an i/o timeout after the commit's bound, 300ms", took, err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The abandoned backend finishes its statement (and exits on its
	// closed socket) once the lock is gone.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var busy int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still busy", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting {
		t.Fatalf("run after the lock: %+v %v", out, err)
	}
}
