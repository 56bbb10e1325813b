package graph_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// readCounter counts the interrupts the engine reads from its store.
type readCounter struct {
	graph.Checkpointer
	reads atomic.Int32
}

func (r *readCounter) Interrupt(ctx context.Context, id string) (*graph.Interrupt, error) {
	r.reads.Add(1)
	return r.Checkpointer.Interrupt(ctx, id)
}

// TestDecideInterrupt: an interrupt the caller has read is not read again;
// a copy that went stale is a conflict (the store checks, not the copy);
// a copy of another interrupt is ignored.
func TestDecideInterrupt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	e := newEnv(t, gateGraph("gate", true, &runs))
	rc := &readCounter{Checkpointer: e.cp}
	eng, err := graph.NewEngine(rc, []graph.Workflow{gateGraph("gate", true, &runs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := e.create("gate", `{"gates": {}}`), e.create("gate", `{"gates": {}}`)
	itrA, itrB := e.waiting(a), e.waiting(b)

	stale := *itrA
	if _, err := eng.DecideInterrupt(ctx, a, itrA, graph.DecisionInput{InterruptID: itrA.ID, Action: "approve"}); err != nil {
		t.Fatalf("DecideInterrupt: %v", err)
	}
	if n := rc.reads.Load(); n != 0 {
		t.Errorf("the engine read the interrupt %d times, want 0", n)
	}
	if task, _ := e.cp.Task(a); task.Status != graph.StatusQueued {
		t.Fatalf("task after the decision is %s", task.Status)
	}

	// The copy still says pending; the store knows better.
	before := len(e.cp.Events(a))
	_, err = eng.DecideInterrupt(ctx, a, &stale, graph.DecisionInput{InterruptID: itrA.ID, Action: "approve"})
	var ce *graph.ConflictError
	if !errors.As(err, &ce) || ce.InterruptID != itrA.ID || ce.Status != graph.InterruptResolved {
		t.Fatalf("decision on a stale copy = %v, want ConflictError (resolved)", err)
	}
	if after := len(e.cp.Events(a)); after != before {
		t.Errorf("a refused decision added %d events", after-before)
	}

	// A copy of a's interrupt does not stand in for b's.
	_, err = eng.DecideInterrupt(ctx, b, &stale, graph.DecisionInput{InterruptID: itrB.ID, Action: "approve"})
	if err != nil {
		t.Fatalf("DecideInterrupt with another interrupt's copy: %v", err)
	}
	if n := rc.reads.Load(); n != 1 {
		t.Errorf("the engine read %d interrupts, want 1 (b's)", n)
	}
	if itr, _ := e.cp.Interrupt(ctx, itrB.ID); itr.Status != graph.InterruptResolved {
		t.Errorf("b's interrupt is %s", itr.Status)
	}
}
