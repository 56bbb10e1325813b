package graph_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
)

// TestRuledRaise: an interrupt the raise hook decides (a policy rule) is
// written resolved with its decision; the task is queued, and its next
// run goes on as after that decision; rule errors become events.
func TestRuledRaise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := graph.NewMemoryCheckpointer()
	hook := func(_ *graph.Task, itr *graph.Interrupt) {
		if itr.Node == "a" {
			itr.RuleErrors = []graph.RuleError{{Rule: "odd", Error: "no such key: amount"}}
			itr.Ruled = &graph.Ruled{Rule: "auto", By: "policy:auto", Action: graph.ActionApprove}
		}
	}
	e, err := graph.NewEngine(cp, []graph.Workflow{graphtest.GateCycle()}, graph.WithRaiseHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusQueued {
		t.Fatalf("first run: %+v %v", out, err)
	}
	out, err = e.Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Node != "b" {
		t.Fatalf("second run: %+v %v", out, err)
	}
	evs := cp.Events(task.ID)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == graph.EventDecisionRecorded && !strings.Contains(string(ev.Data), `"actor":"policy:auto"`) {
			t.Errorf("decision.recorded %s", ev.Data)
		}
	}
	got := strings.Join(types, " ")
	if !strings.Contains(got, "interrupt.raised interrupt.rule_error decision.recorded") || strings.Count(got, "task.waiting") != 1 {
		t.Errorf("events: %s", got)
	}
}
