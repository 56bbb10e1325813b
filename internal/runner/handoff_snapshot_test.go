package runner_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/runner"
)

// loadCounter is the store as an engine sees it, counting the loads runs
// make.
type loadCounter struct {
	*postgres.Store
	loads atomic.Int64
}

func (l *loadCounter) LoadRun(ctx context.Context, taskID string) (*graph.Snapshot, error) {
	l.loads.Add(1)
	return l.Store.LoadRun(ctx, taskID)
}

// A handoff whose decision read the task in its own transaction
// (Lease.Snapshot) runs the task from that snapshot: no load of its own.
// Without one, the run loads the task as before.
func TestHandoffRunsFromTheDecisionsSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	step := func(_ context.Context, run *graph.NodeRun, s state) (state, error) {
		s.Visits = append(s.Visits, run.Phase)
		return s, nil
	}
	g, err := graph.New[state]("reviewed").
		Node("draft", step).Node("final", step).
		Gate("draft", graph.Gate[state]{Kind: "review", Option: "never",
			OnReject: func(s state, _ string, _ int) (state, error) { return s, nil }}).
		Edge("draft", "final").Edge("final", graph.END).
		Init(func(json.RawMessage, graph.Options) (state, error) { return state{Visits: []string{}}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	store := &loadCounter{Store: postgres.NewStore(b.pool, postgres.Options{})}
	e, err := graph.NewEngine(store, []graph.Workflow{g})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Two tasks waiting at the gate before the runner starts: it finds
	// nothing to claim.
	var ids, itrs []string
	for range 2 {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "reviewed", Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(ctx, task.ID, 0)
		if err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("first run: %+v %v", out, err)
		}
		ids, itrs = append(ids, task.ID), append(itrs, out.Interrupt.ID)
	}
	r := runner.New(store.Store, e, runner.Config{Owner: "r", Workers: 1, LeaseTTL: time.Minute, MaxSweep: time.Hour})
	r.Start()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(sctx)
	})
	decide := func(i int, keep bool) int64 {
		t.Helper()
		// The one worker is offered once the run before it has returned:
		// its task's status is committed a little before that.
		lease, settle := r.Handoff()
		for deadline := time.Now().Add(5 * time.Second); lease == nil && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
			lease, settle = r.Handoff()
		}
		if lease == nil {
			t.Fatal("no worker offered")
		}
		if _, err := e.Decide(ctx, ids[i], graph.DecisionInput{InterruptID: itrs[i], Action: "approve", Lease: lease}); err != nil {
			t.Fatal(err)
		}
		if lease.Fence == 0 || lease.Snapshot == nil {
			t.Fatalf("decision with a handoff: fence %d, snapshot %v", lease.Fence, lease.Snapshot != nil)
		}
		if !keep {
			lease.Snapshot = nil
		}
		before := store.loads.Load()
		settle(ids[i])
		b.waitStatus(t, ids[i], graph.StatusSucceeded, 5*time.Second)
		return store.loads.Load() - before
	}
	if n := decide(0, true); n != 0 {
		t.Errorf("the run of a handoff with the decision's snapshot loaded the task %d times", n)
	}
	if n := decide(1, false); n != 1 {
		t.Errorf("the run of a handoff without a snapshot loaded the task %d times, want 1", n)
	}
	// Both ran on: past the gate to the end, the draft's visit kept.
	for _, id := range ids {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT jsonb_array_length(state->'visits') FROM workflow_checkpoints WHERE task_id = $1`,
			id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("task %s: %d visits, want draft and final", id, n)
		}
	}
}
