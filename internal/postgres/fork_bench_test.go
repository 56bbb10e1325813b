package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// BenchmarkPGForkVsStep interleaves the two costs the fork target is
// stated in — a 10-node task run one at a time (per node step), then a
// fork of that task from its middle checkpoint (one ForkPoint read, one
// commit that writes the new task, its checkpoint and task.forked) — so
// that both see the same fsync regime, and reports their ratio (target:
// a fork costs at most 2 node steps).
func BenchmarkPGForkVsStep(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{graphtest.Linear(benchNodes)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var stepTime, forkTime time.Duration
	for b.Loop() {
		id := createLinear(b, e)
		start := time.Now()
		runToEnd(b, e, id)
		stepTime += time.Since(start)
		start = time.Now()
		if _, err := e.Fork(ctx, graph.ForkRequest{TaskID: id, Step: benchNodes / 2}); err != nil {
			b.Fatal(err)
		}
		forkTime += time.Since(start)
	}
	step := float64(stepTime.Microseconds()) / float64(b.N*benchNodes)
	fork := float64(forkTime.Microseconds()) / float64(b.N)
	b.ReportMetric(step, "us/step")
	b.ReportMetric(fork, "us/fork")
	b.ReportMetric(fork/step, "fork_steps")
}
