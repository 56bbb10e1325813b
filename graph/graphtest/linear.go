// Package graphtest holds graphs shared by tests and benchmarks of the
// engine and its checkpointers.
//
// Test support: it imports graph only.
package graphtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// LinearState is a small, realistic state: a counter, the path taken and a
// note per node.
type LinearState struct {
	Count int               `json:"count"`
	Path  []string          `json:"path"`
	Notes map[string]string `json:"notes"`
}

// Linear returns a graph of n nodes in a line (n1 → n2 → … → END).
func Linear(n int) *graph.Graph[LinearState] {
	b := graph.New[LinearState]("linear")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	for i, name := range names {
		b.Node(name, func(_ context.Context, run *graph.NodeRun, s LinearState) (LinearState, error) {
			s.Count++
			s.Path = append(s.Path, run.Phase)
			s.Notes[run.Node] = "visited at step " + fmt.Sprint(s.Count)
			return s, nil
		})
		if i+1 < n {
			b.Edge(name, names[i+1])
		} else {
			b.Edge(name, graph.END)
		}
	}
	b.Init(func(json.RawMessage, graph.Options) (LinearState, error) {
		return LinearState{Path: []string{}, Notes: map[string]string{}}, nil
	})
	g, err := b.Compile()
	if err != nil {
		panic(err)
	}
	return g
}

// GateCycle returns a graph of two gated nodes in a cycle (a → b → a …):
// every approval leads to the next gate. Both gates use option "never", so
// a task created with options {"gates":{}} stops at each.
func GateCycle() *graph.Graph[LinearState] {
	work := func(_ context.Context, run *graph.NodeRun, s LinearState) (LinearState, error) {
		s.Count++
		run.Artifact(run.Node+".md", "text/markdown", fmt.Sprintf("output %d of %s", s.Count, run.Phase))
		return s, nil
	}
	reject := func(s LinearState, fb string, _ int) (LinearState, error) {
		s.Notes["feedback"] = fb
		return s, nil
	}
	g, err := graph.New[LinearState]("gatecycle").
		Node("a", work).Node("b", work).
		Gate("a", graph.Gate[LinearState]{Kind: "review", Option: "never", Artifact: "a.md", OnReject: reject}).
		Gate("b", graph.Gate[LinearState]{Kind: "review", Option: "never", Artifact: "b.md", OnReject: reject}).
		Edge("a", "b").Edge("b", "a").
		Init(func(json.RawMessage, graph.Options) (LinearState, error) {
			return LinearState{Path: []string{}, Notes: map[string]string{}}, nil
		}).
		Compile()
	if err != nil {
		panic(err)
	}
	return g
}

// RunToGate creates a GateCycle task (its gates all on) on e and runs it
// until it waits at its first gate.
func RunToGate(tb testing.TB, e *graph.Engine) (*graph.Task, *graph.Interrupt) {
	tb.Helper()
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`)})
	if err != nil {
		tb.Fatal(err)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting || out.Interrupt == nil {
		tb.Fatalf("run to the gate: %+v %v", out, err)
	}
	return task, out.Interrupt
}
