package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TestForkThroughStore forks through the store's ForkPoint and Commit: at
// a question (a fresh question, the answers so far kept), and with a
// patched state whose large field the store keeps as a blob, which a fork
// of the fork reads back whole.
func TestForkThroughStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil || out.Interrupt == nil {
		t.Fatalf("%+v %v", out, err)
	}
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	if out, err = e.Run(ctx, task.ID, 0); err != nil || out.Interrupt == nil || out.Interrupt.Node != "ask" {
		t.Fatalf("%+v %v", out, err)
	}
	cur, err := store.CurrentCheckpoint(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}

	snap, err := store.ForkPoint(ctx, task.ID, cur.Step)
	if err != nil || snap.Checkpoint.Step != cur.Step || snap.Interrupt == nil || snap.Interrupt.ID != out.Interrupt.ID ||
		snap.Task.DefinitionVersion != testGraph(t).Version() {
		t.Fatalf("ForkPoint at the question: %+v %v", snap, err)
	}
	f, err := e.Fork(ctx, graph.ForkRequest{TaskID: task.ID, Step: cur.Step, CreatedBy: "ann"})
	if err != nil || f.Status != graph.StatusWaiting {
		t.Fatalf("fork at the question: %+v %v", f, err)
	}
	pending, err := store.PendingInterrupt(ctx, f.ID)
	if err != nil || pending == nil || pending.ID == out.Interrupt.ID || pending.Payload.Question != "Which colour?" {
		t.Fatalf("fork's question: %+v %v", pending, err)
	}
	if _, err := e.Decide(ctx, f.ID, graph.DecisionInput{InterruptID: pending.ID, Action: graph.ActionRespond, Value: json.RawMessage(`"teal"`)}); err != nil {
		t.Fatal(err)
	}
	if out, err := e.Run(ctx, f.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("fork run: %+v %v", out, err)
	}
	if src, _ := store.PendingInterrupt(ctx, task.ID); src == nil || src.ID != out.Interrupt.ID {
		t.Errorf("the source's question after the fork's answer: %+v", src)
	}

	// A large patched field is a blob of the fork; a fork of the fork
	// reads it back.
	big := strings.Repeat("long answer ", 1000)
	patch, _ := json.Marshal(map[string]any{"answer": big})
	f1, err := e.Fork(ctx, graph.ForkRequest{TaskID: task.ID, Step: 0, Patch: patch})
	if err != nil {
		t.Fatal(err)
	}
	f2, err := e.Fork(ctx, graph.ForkRequest{TaskID: f1.ID, Step: 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{f1.ID, f2.ID} {
		cp, err := store.CheckpointAt(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var s counterState
		if err := json.Unmarshal(cp.State, &s); err != nil || s.Answer != big {
			t.Errorf("state of %s at step 0: answer of %d bytes, %v", id, len(s.Answer), err)
		}
	}
	var blobs int
	if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM state_blobs WHERE task_id = $1`, f1.ID).Scan(&blobs); err != nil || blobs == 0 {
		t.Errorf("the fork's large field is not a blob: %d blobs, %v", blobs, err)
	}
	forks, err := store.Forks(ctx, task.ID)
	if err != nil || len(forks) != 2 || forks[0].ID != f.ID || forks[1].ForkedFrom == nil || forks[1].ForkedFrom.Step != 0 {
		t.Errorf("forks of the source: %+v %v", forks, err)
	}

	if _, err := store.ForkPoint(ctx, task.ID, 99); !errors.Is(err, graph.ErrCheckpointNotFound) {
		t.Errorf("ForkPoint of a missing step: %v", err)
	}
	if _, err := store.ForkPoint(ctx, graph.NewID(), 0); !errors.Is(err, graph.ErrTaskNotFound) {
		t.Errorf("ForkPoint of a missing task: %v", err)
	}
}
