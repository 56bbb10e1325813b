package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// listSetup: a store and an engine whose clock stands still, so every task
// has the same created_at and the keyset must page on the id alone.
func listSetup(t *testing.T) (*postgres.Store, *graph.Engine) {
	t.Helper()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle(), graphtest.Linear(1)},
		graph.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	return store, e
}

func TestListTasksKeysetWithEqualTimes(t *testing.T) {
	t.Parallel()
	store, e := listSetup(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		wf := "gatecycle"
		if i%3 == 0 {
			wf = "linear"
		}
		task, err := e.Create(ctx, graph.NewTask{Workflow: wf, Options: []byte(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	slices.Sort(ids)
	slices.Reverse(ids) // newest first = id descending when times tie

	var got []string
	var sizes []int
	var cursor *postgres.TaskCursor
	for range 10 {
		page, next, err := store.ListTasks(ctx, postgres.TaskFilter{Limit: 2, After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page))
		for _, task := range page {
			got = append(got, task.ID)
		}
		if next == nil {
			break
		}
		cursor = next
	}
	if !slices.Equal(sizes, []int{2, 2, 2, 1}) || !slices.Equal(got, ids) {
		t.Fatalf("pages %v, ids %v, want %v", sizes, got, ids)
	}

	// Two gatecycle tasks wait at their first gate.
	var waiting []string
	for _, id := range got {
		task, err := store.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Workflow != "gatecycle" || len(waiting) == 2 {
			continue
		}
		if out, err := e.Run(ctx, id, task.Fence); err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run: %+v %v", out, err)
		}
		waiting = append(waiting, id)
	}
	for _, tc := range []struct {
		f    postgres.TaskFilter
		want int
	}{
		{postgres.TaskFilter{Status: graph.StatusWaiting, Limit: 10}, 2},
		{postgres.TaskFilter{Status: graph.StatusQueued, Limit: 10}, 5},
		{postgres.TaskFilter{Status: graph.StatusQueued, Workflow: "linear", Limit: 10}, 3},
		{postgres.TaskFilter{Workflow: "gatecycle", Limit: 10}, 4},
		{postgres.TaskFilter{Workflow: "none", Limit: 10}, 0},
		{postgres.TaskFilter{Status: graph.StatusFailed, Limit: 10}, 0},
	} {
		page, next, err := store.ListTasks(ctx, tc.f)
		if err != nil || len(page) != tc.want || next != nil {
			t.Errorf("%+v: %d tasks (next %v, err %v), want %d", tc.f, len(page), next, err, tc.want)
		}
		for _, task := range page {
			if tc.f.Status != "" && task.Status != tc.f.Status || tc.f.Workflow != "" && task.Workflow != tc.f.Workflow {
				t.Errorf("%+v returned %+v", tc.f, task)
			}
		}
	}

	pending, err := store.PendingInterrupts(ctx, ids...)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending interrupts: %v %v", pending, err)
	}
	for _, id := range waiting {
		itr, err := store.PendingInterrupt(ctx, id)
		if err != nil || itr == nil || itr.TaskID != id || itr.Status != graph.InterruptPending || pending[id].ID != itr.ID {
			t.Fatalf("pending interrupt of %s: %+v %v", id, itr, err)
		}
	}
	for _, id := range ids {
		if slices.Contains(waiting, id) {
			continue
		}
		if itr, err := store.PendingInterrupt(ctx, id); err != nil || itr != nil {
			t.Fatalf("queued task %s has pending interrupt %+v (%v)", id, itr, err)
		}
	}

	inbox, err := store.ListInterrupts(ctx, postgres.InterruptFilter{Status: graph.InterruptPending, Limit: 10})
	if err != nil || len(inbox) != 2 {
		t.Fatalf("inbox: %+v %v", inbox, err)
	}
	for _, entry := range inbox {
		if entry.Task.ID != entry.TaskID || entry.Task.Workflow != "gatecycle" || entry.Kind != "review" {
			t.Errorf("inbox entry %+v", entry)
		}
	}
	for _, tc := range []struct {
		f    postgres.InterruptFilter
		want int
	}{
		{postgres.InterruptFilter{Status: graph.InterruptPending, Kind: "review", Limit: 10}, 2},
		{postgres.InterruptFilter{Status: graph.InterruptPending, Kind: "prd", Limit: 10}, 0},
		{postgres.InterruptFilter{Status: graph.InterruptPending, Limit: 1}, 1},
		{postgres.InterruptFilter{Status: graph.InterruptResolved, Limit: 10}, 0},
	} {
		if got, err := store.ListInterrupts(ctx, tc.f); err != nil || len(got) != tc.want {
			t.Errorf("%+v: %d (%v), want %d", tc.f, len(got), err, tc.want)
		}
	}

	if _, _, err := store.ListTasks(ctx, postgres.TaskFilter{Limit: 1, After: &postgres.TaskCursor{ID: "x"}}); !errors.Is(err, graph.ErrInvalid) {
		t.Errorf("bad cursor id: %v", err)
	}
}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	store, e := listSetup(t)
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, task.ID, 0); err != nil {
		t.Fatal(err)
	}
	cur, err := store.CurrentCheckpoint(ctx, task.ID)
	if err != nil || cur.Step < 1 || cur.LastNode != "a" || cur.NextNode != "a" || len(cur.State) == 0 {
		t.Fatalf("current: %+v %v", cur, err)
	}
	hist, err := store.History(ctx, task.ID)
	if err != nil || hist[len(hist)-1].Step != cur.Step {
		t.Fatalf("history %+v %v", hist, err)
	}
	cp, err := store.CheckpointAt(ctx, task.ID, cur.Step)
	if err != nil || cp.Step != cur.Step || string(cp.State) != string(cur.State) || cp.Reason != "node" {
		t.Fatalf("checkpoint at %d: %+v %v", cur.Step, cp, err)
	}
	if _, err := store.CheckpointAt(ctx, task.ID, cur.Step+1); !errors.Is(err, postgres.ErrCheckpointNotFound) {
		t.Errorf("missing step: %v", err)
	}
	if _, err := store.CheckpointAt(ctx, graph.NewID(), 0); !errors.Is(err, postgres.ErrCheckpointNotFound) {
		t.Errorf("missing task: %v", err)
	}
	if _, err := store.CurrentCheckpoint(ctx, graph.NewID()); !errors.Is(err, graph.ErrTaskNotFound) {
		t.Errorf("current of missing task: %v", err)
	}
	if _, err := store.CurrentCheckpoint(ctx, "nope"); !errors.Is(err, graph.ErrTaskNotFound) {
		t.Errorf("current of malformed id: %v", err)
	}
}
