package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// TestDecisionSubjectAndTaskWithPending: the joined reads return exactly
// what the separate reads (Task, Interrupt, PendingInterrupt) return.
func TestDecisionSubjectAndTaskWithPending(t *testing.T) {
	t.Parallel()
	store, e := listSetup(t)
	ctx := context.Background()
	waitingTask := func() (*graph.Task, *graph.Interrupt) {
		t.Helper()
		task, err := e.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(ctx, task.ID, 0)
		if err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run: %+v %v", out, err)
		}
		return task, out.Interrupt
	}
	a, itrA := waitingTask()
	b, itrB := waitingTask()
	queued, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	task := func(id string) *graph.Task {
		t.Helper()
		got, err := store.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	interrupt := func(id string) *graph.Interrupt {
		t.Helper()
		got, err := store.Interrupt(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	subject := func(taskID, itrID string, wantTask *graph.Task, wantItr *graph.Interrupt) {
		t.Helper()
		gotTask, gotItr, err := store.DecisionSubject(ctx, taskID, itrID)
		if err != nil || !reflect.DeepEqual(gotTask, wantTask) || !reflect.DeepEqual(gotItr, wantItr) {
			t.Errorf("DecisionSubject(%s, %q) = %+v, %+v, %v;\nwant %+v, %+v", taskID, itrID, gotTask, gotItr, err, wantTask, wantItr)
		}
	}
	pending := func(taskID string, wantItr *graph.Interrupt) {
		t.Helper()
		gotTask, gotItr, err := store.TaskWithPending(ctx, taskID)
		if err != nil || !reflect.DeepEqual(gotTask, task(taskID)) || !reflect.DeepEqual(gotItr, wantItr) {
			t.Errorf("TaskWithPending(%s) = %+v, %+v, %v; want %+v", taskID, gotTask, gotItr, err, wantItr)
		}
		if p, err := store.PendingInterrupt(ctx, taskID); err != nil || !reflect.DeepEqual(p, wantItr) {
			t.Errorf("PendingInterrupt(%s) = %+v %v, TaskWithPending says %+v", taskID, p, err, wantItr)
		}
	}

	subject(a.ID, itrA.ID, task(a.ID), interrupt(itrA.ID))
	subject(a.ID, itrB.ID, task(a.ID), interrupt(itrB.ID)) // another task's: the caller tells
	subject(a.ID, graph.NewID(), task(a.ID), nil)
	subject(a.ID, "nope", task(a.ID), nil)
	subject(a.ID, "", task(a.ID), nil)
	pending(a.ID, interrupt(itrA.ID))
	pending(b.ID, interrupt(itrB.ID))
	pending(queued.ID, nil)

	for _, id := range []string{graph.NewID(), "x"} {
		if _, _, err := store.DecisionSubject(ctx, id, itrA.ID); !errors.Is(err, graph.ErrTaskNotFound) {
			t.Errorf("DecisionSubject of task %q: %v, want ErrTaskNotFound", id, err)
		}
		if _, _, err := store.TaskWithPending(ctx, id); !errors.Is(err, graph.ErrTaskNotFound) {
			t.Errorf("TaskWithPending of task %q: %v, want ErrTaskNotFound", id, err)
		}
	}

	if _, err := e.Decide(ctx, a.ID, graph.DecisionInput{InterruptID: itrA.ID, Action: graph.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	resolved := interrupt(itrA.ID)
	if resolved.Status != graph.InterruptResolved || resolved.ResolvedAt == nil {
		t.Fatalf("decided interrupt: %+v", resolved)
	}
	subject(a.ID, itrA.ID, task(a.ID), resolved)
	pending(a.ID, nil)
}
