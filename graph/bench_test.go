package graph_test

import (
	"context"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
)

// BenchmarkMemStep runs the 10-node linear graph on the in-memory
// checkpointer and reports the engine's own cost per node run.
func BenchmarkMemStep(b *testing.B) {
	const nodes = 10
	cp := graph.NewMemoryCheckpointer()
	cp.KeepHistory = false
	e, err := graph.NewEngine(cp, []graph.Workflow{graphtest.Linear(nodes)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
		if err != nil {
			b.Fatal(err)
		}
		out, err := e.Run(ctx, t.ID, 0)
		if err != nil || out.Status != graph.StatusSucceeded {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*nodes), "us/step")
}
