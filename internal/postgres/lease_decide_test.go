package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// A decision with a lease leases the task it makes runnable, in its own
// transaction: running, owned, the fence moved on as by a claim. The
// lease's fence is the one to run it with; the previous one is stale.
func TestDecisionLeasesTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	task, err := b.engine(t).Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.engine(t).Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting {
		t.Fatalf("first run: %+v %v", out, err)
	}
	lease := &graph.Lease{Owner: "replica-a", TTL: time.Minute}
	d, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "approve",
		DecidedBy: "ann", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Fence != 1 || d.Lease != lease {
		t.Fatalf("lease fence %d (decision lease %p, want %p), want 1", lease.Fence, d.Lease, lease)
	}
	var status, owner, last string
	var fence int64
	var left time.Duration
	if err := b.pool.QueryRow(ctx, `SELECT status, lease_owner, last_owner, lease_fence, lease_expires_at - now()
		FROM tasks WHERE id = $1`, task.ID).Scan(&status, &owner, &last, &fence, &left); err != nil {
		t.Fatal(err)
	}
	if status != "running" || owner != "replica-a" || last != "replica-a" || fence != 1 || left < 50*time.Second {
		t.Fatalf("task after a leasing decision: %s owner=%s last=%s fence=%d expires in %s", status, owner, last, fence, left)
	}
	// No worker may claim it while the lease lasts.
	if cs, err := b.store.Claim(ctx, "replica-b", 10, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("claim of a leased task: %+v %v", cs, err)
	}
	// The old fence is stale; the lease's runs the task on.
	if _, err := b.engine(t).Run(ctx, task.ID, 0); !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("run with the fence before the decision: %v, want ErrLeaseLost", err)
	}
	next, err := b.engine(t).Run(ctx, task.ID, lease.Fence)
	if err != nil || next.Status != graph.StatusWaiting || next.Interrupt.Kind != "question" {
		t.Fatalf("run with the lease: %+v %v", next, err)
	}
	// Without a lease a decision queues the task for any worker, as before.
	d2, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: next.Interrupt.ID, Action: "respond",
		Value: json.RawMessage(`"blue"`)})
	if err != nil || d2.Lease != nil {
		t.Fatalf("decision without a lease: %+v %v", d2, err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT status FROM tasks WHERE id = $1", task.ID).Scan(&status); err != nil || status != "queued" {
		t.Fatalf("status %q %v, want queued", status, err)
	}
}

// reviewedGraph drafts a large document behind a gate, then counts once
// more.
func reviewedGraph(tb testing.TB) graph.Workflow {
	count := func(_ context.Context, _ *graph.NodeRun, s sizedState) (sizedState, error) {
		s.Count++
		return s, nil
	}
	g, err := graph.New[sizedState]("reviewed").
		Node("draft", count).Node("final", count).
		Gate("draft", graph.Gate[sizedState]{Kind: "review", Option: "never",
			OnReject: func(s sizedState, _ string, _ int) (sizedState, error) { return s, nil }}).
		Edge("draft", "final").Edge("final", graph.END).
		Init(sizedInit).
		Compile()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// A decision that leases its task carries the task as the decision left
// it, read in the decision's transaction: what a load by the lease holder
// reads (large fields apart, blobs and all), so the run starts from it
// without a load. A decision that only queues the task carries none.
func TestDecisionLeaseCarriesTheSnapshot(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{reviewedGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waiting := func() (*graph.Task, *graph.Interrupt) {
		t.Helper()
		task, err := e.Create(ctx, graph.NewTask{Workflow: "reviewed", Input: json.RawMessage(`{"size": 70000}`),
			Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(ctx, task.ID, 0)
		if err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("first run: %+v %v", out, err)
		}
		return task, out.Interrupt
	}
	task, itr := waiting()
	var blobs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_blobs WHERE task_id = $1`, task.ID).Scan(&blobs); err != nil || blobs == 0 {
		t.Fatalf("%d blobs (%v): the document is not stored apart, the test proves less", blobs, err)
	}
	lease := &graph.Lease{Owner: "replica-a", TTL: time.Minute}
	// A value as a client may send it: the snapshot holds it as stored.
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: "approve", DecidedBy: "ann",
		Feedback: " fine ", Value: json.RawMessage(`{"b":1,  "a":[2]}`), Lease: lease}); err != nil {
		t.Fatal(err)
	}
	if lease.Fence == 0 || lease.Snapshot == nil {
		t.Fatalf("leasing decision: fence %d, snapshot %v", lease.Fence, lease.Snapshot)
	}
	// What a store that holds nothing loads now.
	want, err := postgres.NewStore(pool, postgres.Options{}).LoadRun(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := lease.Snapshot
	if !reflect.DeepEqual(got.Task, want.Task) || got.Task.Fence != lease.Fence || got.Task.Status != graph.StatusRunning {
		t.Errorf("task:\n got %+v\nwant %+v", got.Task, want.Task)
	}
	if !reflect.DeepEqual(got.Checkpoint, want.Checkpoint) || len(got.Checkpoint.Fields) == 0 {
		t.Errorf("checkpoint: got %d fields, state %.100s; want %d fields, state %.100s",
			len(got.Checkpoint.Fields), got.Checkpoint.State, len(want.Checkpoint.Fields), want.Checkpoint.State)
	}
	if !reflect.DeepEqual(got.Interrupt, want.Interrupt) || got.Interrupt.Status != graph.InterruptResolved {
		t.Errorf("interrupt:\n got %+v\nwant %+v", got.Interrupt, want.Interrupt)
	}
	if !reflect.DeepEqual(got.Decision, want.Decision) || got.Decision == nil || got.Decision.DecidedBy != "ann" ||
		got.Decision.Feedback != "fine" || string(got.Decision.Value) != `{"a": [2], "b": 1}` {
		t.Errorf("decision:\n got %+v\nwant %+v", got.Decision, want.Decision)
	}
	// The run from it goes on past the gate and keeps the document.
	out, err := e.RunFrom(ctx, got, lease.Fence, nil)
	if err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("run from the decision's snapshot: %+v %v", out, err)
	}
	cp, err := store.CurrentCheckpoint(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var s sizedState
	if err := json.Unmarshal(cp.State, &s); err != nil || s.Count != 2 || s.Doc != prose(70000) {
		t.Errorf("after the run: count %d, document of %d bytes (%v)", s.Count, len(s.Doc), err)
	}

	// A task that was not waiting is queued, not leased: no snapshot.
	task, itr = waiting()
	if _, err := pool.Exec(ctx, `UPDATE tasks SET status = 'queued' WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	lease = &graph.Lease{Owner: "replica-a", TTL: time.Minute}
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: "approve", Lease: lease}); err != nil {
		t.Fatal(err)
	}
	if lease.Fence != 0 || lease.Snapshot != nil {
		t.Errorf("decision on a queued task: fence %d, snapshot %v", lease.Fence, lease.Snapshot != nil)
	}
}
