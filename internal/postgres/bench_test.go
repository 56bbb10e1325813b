package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

const benchNodes = 10

// BenchmarkPGStep runs the 10-node linear graph on PostgreSQL, one task at
// a time, and reports the time per node run. Tasks are created before the
// clock starts: creation is not a step (BenchmarkPGTask includes it).
func BenchmarkPGStep(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{graphtest.Linear(benchNodes)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		t, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	b.ResetTimer()
	for _, id := range ids {
		out, err := e.Run(ctx, id, 0)
		if err != nil || out.Status != graph.StatusSucceeded {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*benchNodes), "us/step")
}

// BenchmarkPGTask creates and runs 10-node linear tasks, one at a time.
func BenchmarkPGTask(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{graphtest.Linear(benchNodes)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		t, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
		if err != nil {
			b.Fatal(err)
		}
		if out, err := e.Run(ctx, t.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/task")
}

// BenchmarkPGGateCycle measures raise → decide → next gate on PostgreSQL:
// one Decide and one Run per cycle.
func BenchmarkPGGateCycle(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	t, err := e.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		b.Fatal(err)
	}
	out, err := e.Run(ctx, t.ID, 0)
	if err != nil || out.Interrupt == nil {
		b.Fatalf("%+v %v", out, err)
	}
	b.ResetTimer()
	for b.Loop() {
		// The task as the Decider passes it: no read of it to check the
		// interrupt's node against the running definition.
		if _, err := e.Decide(ctx, t.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionApprove, Task: t}); err != nil {
			b.Fatal(err)
		}
		if out, err = e.Run(ctx, t.ID, 0); err != nil || out.Interrupt == nil {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/cycle")
}

// BenchmarkFloorUpsert is the physical floor a checkpointed step is
// compared with: one autocommitted single-row INSERT … ON CONFLICT DO UPDATE
// of a jsonb state of the same size as the 10-node graph's, on one
// connection.
func BenchmarkFloorUpsert(b *testing.B) {
	floor := newFloor(b, pgtest.NewPool(b))
	b.ResetTimer()
	for b.Loop() {
		floor.upsert(b, 1)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
	b.ReportMetric(float64(len(floor.state)), "state_bytes")
}

// floor is BenchmarkFloorUpsert's table and connection.
type floor struct {
	conn  *pgxpool.Conn
	id    uuid.UUID
	state json.RawMessage
}

func newFloor(b *testing.B, pool *pgxpool.Pool) *floor {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, `CREATE TABLE floor_state (id uuid PRIMARY KEY, state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	return &floor{conn: conn, id: uuid.New(), state: midRunState(b)}
}

// upsert runs n floor upserts and returns how long they took.
func (f *floor) upsert(b *testing.B, n int) time.Duration {
	start := time.Now()
	for range n {
		if _, err := f.conn.Exec(context.Background(), `INSERT INTO floor_state (id, state) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()`, f.id, f.state); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// midRunState is the linear graph's state halfway through, as JSON.
func midRunState(tb testing.TB) json.RawMessage {
	s := graphtest.LinearState{Path: []string{}, Notes: map[string]string{}}
	for i := 1; i <= benchNodes/2; i++ {
		name := fmt.Sprintf("n%d", i)
		s.Count++
		s.Path = append(s.Path, name)
		s.Notes[name] = fmt.Sprintf("visited at step %d", i)
	}
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkPGStepVsFloor interleaves the two measurements the target is
// stated in — a 10-node task run one at a time, then ten floor upserts on
// one connection — so that both see the same fsync regime of the machine,
// and reports their ratio.
func BenchmarkPGStepVsFloor(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{graphtest.Linear(benchNodes)})
	if err != nil {
		b.Fatal(err)
	}
	loopVsFloor(b, pool, e, func(id string) { runToEnd(b, e, id) })
}

// loopVsFloor creates a linear task on e, times run on it, then ten floor
// upserts, until b is done, and reports the time per step and its ratio.
func loopVsFloor(b *testing.B, pool *pgxpool.Pool, e *graph.Engine, run func(id string)) {
	floor := newFloor(b, pool)
	var stepTime, floorTime time.Duration
	for b.Loop() {
		id := createLinear(b, e)
		start := time.Now()
		run(id)
		stepTime += time.Since(start)
		floorTime += floor.upsert(b, benchNodes)
	}
	steps := float64(b.N * benchNodes)
	b.ReportMetric(float64(stepTime.Microseconds())/steps, "us/step")
	b.ReportMetric(float64(floorTime.Microseconds())/steps, "floor_us/op")
	b.ReportMetric(float64(stepTime)/float64(floorTime), "ratio")
}

func createLinear(b *testing.B, e *graph.Engine) string {
	t, err := e.Create(context.Background(), graph.NewTask{Workflow: "linear"})
	if err != nil {
		b.Fatal(err)
	}
	return t.ID
}

// runToEnd runs task id on e, which must succeed.
func runToEnd(b *testing.B, e *graph.Engine, id string) {
	if out, err := e.Run(context.Background(), id, 0); err != nil || out.Status != graph.StatusSucceeded {
		b.Fatalf("%+v %v", out, err)
	}
}

// BenchmarkPGStoreStepVsFloor is BenchmarkPGStepVsFloor without the
// engine: the store's load and commits of a 10-node run, recorded from one
// run of the engine and sent again for each new task, against the same
// floor. What it measures is what PostgreSQL and the store cost a step;
// BenchmarkPGStepVsFloor's figure less this one is the engine's share.
func BenchmarkPGStoreStepVsFloor(b *testing.B) {
	pool := pgtest.NewPool(b)
	st := newStore(b, pool)
	rec := &commitRecorder{Store: st}
	e, err := graph.NewEngine(rec, []graph.Workflow{graphtest.Linear(benchNodes)})
	if err != nil {
		b.Fatal(err)
	}
	id := createLinear(b, e)
	rec.on = true // the run's commits, not the create's
	runToEnd(b, e, id)
	rec.on = false
	if len(rec.commits) != benchNodes {
		b.Fatalf("recorded %d commits of a %d-node run", len(rec.commits), benchNodes)
	}
	ctx := context.Background()
	loopVsFloor(b, pool, e, func(id string) {
		if _, err := st.LoadRun(ctx, id); err != nil {
			b.Fatal(err)
		}
		for _, c := range rec.commits {
			if err := st.Commit(ctx, replay(c, id)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// commitRecorder keeps a copy of every commit its Store makes while on.
type commitRecorder struct {
	*postgres.Store
	on      bool
	commits []*graph.Commit
}

func (r *commitRecorder) Commit(ctx context.Context, c *graph.Commit) error {
	if r.on {
		r.commits = append(r.commits, replay(c, c.TaskID))
	}
	return r.Store.Commit(ctx, c)
}

// replay is a copy of c for task id, as the store takes it (the store sets
// its events' seqs).
func replay(c *graph.Commit, id string) *graph.Commit {
	if c == nil {
		return nil
	}
	x := *c
	x.TaskID = id
	x.Events = slices.Clone(c.Events)
	if c.Checkpoint != nil {
		cp := *c.Checkpoint
		cp.TaskID = id
		x.Checkpoint = &cp
	}
	x.Before = replay(c.Before, id)
	return &x
}

// newStore is a Store as serve runs it: announcements sent by the
// background notifier.
func newStore(b *testing.B, pool *pgxpool.Pool) *postgres.Store {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	s := postgres.NewStore(pool, postgres.Options{})
	s.StartNotifier(ctx, nil)
	return s
}
