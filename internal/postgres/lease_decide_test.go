package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/graph"
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
