package timekeeper_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/timekeeper"
)

// BenchmarkTimers10k: 10,000 interrupts whose deadlines (on_timeout fail)
// all fall due in the same second, one keeper: how long after the due
// instant the last one fired (target: within 2 s), each exactly once; and
// what an idle keeper costs: wake-ups per second with the next timer an
// hour away (target: none beyond the one per next deadline).
func BenchmarkTimers10k(b *testing.B) {
	const n = 10000
	var fires []float64
	for range b.N {
		b.StopTimer()
		pool := pgtest.NewPool(b)
		ctx := context.Background()
		due := time.Now().Add(3 * time.Second).Truncate(time.Second)
		_, err := pool.Exec(ctx, `
WITH t AS (
    INSERT INTO tasks (id, workflow, title, status, current_node, created_by)
    SELECT gen_random_uuid(), 'feature', 'timer ' || g, 'waiting', 'requirements', 'seed' FROM generate_series(1, $1) g
    RETURNING id
), i AS (
    INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, deadline_at)
    SELECT gen_random_uuid(), id, 'requirements', 'prd', 1, '{"type":"gate","title":"t","artifact":null,"actions":["approve"]}', 'pending', $2
    FROM t RETURNING id, task_id
)
INSERT INTO interrupt_timers (interrupt_id, task_id, what, step, due_at, action)
SELECT id, task_id, 'deadline', 0, $2, 'fail' FROM i`, n, due)
		if err != nil {
			b.Fatal(err)
		}
		store := postgres.NewStore(pool, postgres.Options{})
		k := timekeeper.New(store, auth.DefaultPolicy(), nil)
		k.Start()
		b.StartTimer()
		for {
			var left int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM interrupt_timers").Scan(&left); err != nil {
				b.Fatal(err)
			}
			if left == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		var last time.Time
		var expired, failed int
		if err := pool.QueryRow(ctx, `SELECT max(created_at), count(*) FROM task_events WHERE type = 'interrupt.expired'`).Scan(&last, &expired); err != nil {
			b.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM task_events WHERE type = 'task.failed'`).Scan(&failed); err != nil {
			b.Fatal(err)
		}
		if expired != n || failed != n {
			b.Fatalf("%d expiries and %d failures, want %d each", expired, failed, n)
		}
		fires = append(fires, float64(last.Sub(due).Milliseconds()))
		k.Stop()
		// Idle: the next timer an hour away.
		if _, err := pool.Exec(ctx, `INSERT INTO interrupt_timers (interrupt_id, task_id, what, step, due_at, action)
			SELECT id, task_id, 'escalate', 9, now() + interval '1 hour', '' FROM interrupts LIMIT 1`); err != nil {
			b.Fatal(err)
		}
		idle := timekeeper.New(store, auth.DefaultPolicy(), nil)
		idle.Start()
		time.Sleep(3 * time.Second)
		idle.Stop()
		_, wakeups := idle.Stats()
		b.ReportMetric(float64(wakeups-1)/3, "idle_wakeups/s")
	}
	sort.Float64s(fires)
	b.ReportMetric(fires[len(fires)-1], "last_fired_after_due_ms")
	b.ReportMetric(n, "timers")
}
