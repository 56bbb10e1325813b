package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/runner"
)

// The store the server runs on is the runner's.
var _ runner.Store = (*postgres.Store)(nil)

type state struct {
	Visits []string `json:"visits"`
}

// gate lets a test hold node "slow" of chosen tasks until released.
type gate struct {
	mu      sync.Mutex
	hold    bool
	entered chan string
	release chan struct{}
	runs    atomic.Int64
	// cancelled counts held node runs whose ctx ended (a lost lease).
	cancelled atomic.Int64
}

func newGate() *gate {
	return &gate{entered: make(chan string, 100), release: make(chan struct{})}
}

func (g *gate) graph(t testing.TB) *graph.Graph[state] {
	step := func(_ context.Context, run *graph.NodeRun, s state) (state, error) {
		s.Visits = append(s.Visits, run.Phase)
		return s, nil
	}
	slow := func(ctx context.Context, run *graph.NodeRun, s state) (state, error) {
		g.runs.Add(1)
		g.mu.Lock()
		hold := g.hold
		g.mu.Unlock()
		if hold {
			g.entered <- run.TaskID
			select {
			case <-g.release:
			case <-ctx.Done():
				g.cancelled.Add(1)
				return s, ctx.Err()
			}
		}
		s.Visits = append(s.Visits, run.Phase)
		return s, nil
	}
	gr, err := graph.New[state]("chain").
		Node("a", step).Node("slow", slow).Node("c", step).
		Edge("a", "slow").Edge("slow", "c").Edge("c", graph.END).
		Init(func(json.RawMessage, graph.Options) (state, error) { return state{Visits: []string{}}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return gr
}

type replica struct {
	store  *postgres.Store
	engine *graph.Engine
	runner *runner.Runner
	hub    *live.Hub
	cancel context.CancelFunc
}

type bundle struct {
	pool *pgxpool.Pool
	url  string
	g    *gate
}

func setup(t *testing.T) bundle {
	t.Helper()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return bundle{pool: pool, url: url, g: newGate()}
}

// replica starts a runner with its own store, engine and hub, as a
// separate process would have.
func (b bundle) replica(t *testing.T, name string, workers int, ttl time.Duration) *replica {
	t.Helper()
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{b.g.graph(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hub := live.NewHub(b.url, store, nil)
	go hub.Run(ctx)
	<-hub.Ready()
	r := runner.New(store, e, runner.Config{Owner: name, Workers: workers, LeaseTTL: ttl})
	hub.OnRunnable(r.WakeFor)
	r.Start()
	rep := &replica{store: store, engine: e, runner: r, hub: hub, cancel: cancel}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		r.Stop(sctx)
		cancel()
	})
	return rep
}

func (b bundle) create(t *testing.T, e *graph.Engine, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		task, err := e.Create(context.Background(), graph.NewTask{Workflow: "chain", Title: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	return ids
}

func (b bundle) waitStatus(t *testing.T, id string, want graph.TaskStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var got string
	for time.Now().Before(deadline) {
		if err := b.pool.QueryRow(context.Background(), "SELECT status FROM tasks WHERE id = $1", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == string(want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s is %s after %s, want %s", id, got, within, want)
}

// completions counts node completions per node in the history of a task.
func (b bundle) completions(t *testing.T, id string) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		"SELECT last_node_id, count(*) FROM checkpoint_history WHERE task_id = $1 AND reason = 'node' GROUP BY 1", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var n string
		var c int
		if err := rows.Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

func TestTwoReplicasShareTheWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r1 := b.replica(t, "r1", 4, 5*time.Second)
	r2 := b.replica(t, "r2", 4, 5*time.Second)
	ids := b.create(t, r1.engine, 40)
	for _, id := range ids {
		b.waitStatus(t, id, graph.StatusSucceeded, 20*time.Second)
		if c := b.completions(t, id); c["a"] != 1 || c["slow"] != 1 || c["c"] != 1 {
			t.Fatalf("task %s completions %v, want each node once", id, c)
		}
	}
	if r1.runner.Executed() == 0 || r2.runner.Executed() == 0 {
		t.Fatalf("executed r1=%d r2=%d: both replicas should take work", r1.runner.Executed(), r2.runner.Executed())
	}
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{b.g.graph(t)})
	if err != nil {
		t.Fatal(err)
	}
	id := b.create(t, e, 1)[0]
	// A replica claims the task and dies without a word: its lease runs out.
	claims, err := store.Claim(context.Background(), "dead", 1, 500*time.Millisecond)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	start := time.Now()
	b.replica(t, "survivor", 2, 500*time.Millisecond)
	b.waitStatus(t, id, graph.StatusSucceeded, 10*time.Second)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("taken over after %s, before the lease expired", waited)
	}
	var owner *string
	var fence int64
	if err := b.pool.QueryRow(context.Background(), "SELECT lease_owner, lease_fence FROM tasks WHERE id = $1", id).Scan(&owner, &fence); err != nil {
		t.Fatal(err)
	}
	if owner != nil || fence != 2 {
		t.Fatalf("after takeover: owner %v fence %d, want no owner and fence 2", owner, fence)
	}
	// The dead replica's writes are refused.
	if err := store.Heartbeat(context.Background(), claims[0], time.Second); err == nil {
		t.Fatal("stale heartbeat accepted")
	}
}

func TestShutdownHandsBackLeaseAndAnotherReplicaFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.g.hold = true
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{b.g.graph(t)})
	if err != nil {
		t.Fatal(err)
	}
	r1 := runner.New(store, e, runner.Config{Owner: "r1", Workers: 2, LeaseTTL: 30 * time.Second})
	r1.Start()
	id := b.create(t, e, 1)[0]
	r1.Wake()
	select {
	case <-b.g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("node never started")
	}
	// The grace period ends before the node does: the lease goes back.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	r1.Stop(ctx)
	cancel()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("stop took %s", d)
	}
	b.g.mu.Lock()
	b.g.hold = false
	b.g.mu.Unlock()
	// With a 30s lease, only a handed-back lease lets r2 continue this fast.
	b.replica(t, "r2", 2, 30*time.Second)
	b.waitStatus(t, id, graph.StatusSucceeded, 5*time.Second)
	if c := b.completions(t, id); c["a"] != 1 || c["slow"] != 1 || c["c"] != 1 {
		t.Fatalf("completions %v, want each node once", c)
	}
}

func TestShutdownLetsNodeFinishWithinGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.g.hold = true
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{b.g.graph(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := runner.New(store, e, runner.Config{Owner: "r", Workers: 1, LeaseTTL: 30 * time.Second})
	r.Start()
	id := b.create(t, e, 1)[0]
	r.Wake()
	<-b.g.entered
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(b.g.release)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r.Stop(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stop took %s", d)
	}
	// The node in flight finished within the grace period; no other node
	// started; the lease went back.
	if c := b.completions(t, id); c["a"] != 1 || c["slow"] != 1 || c["c"] != 0 {
		t.Fatalf("after stop: completions %v, want a and slow once, c not yet", c)
	}
	var owner *string
	if err := b.pool.QueryRow(context.Background(), "SELECT lease_owner FROM tasks WHERE id = $1", id).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		t.Fatalf("lease still held by %s", *owner)
	}
	b.replica(t, "r2", 1, 30*time.Second)
	b.waitStatus(t, id, graph.StatusSucceeded, 5*time.Second)
	if c := b.completions(t, id); c["a"] != 1 || c["slow"] != 1 || c["c"] != 1 {
		t.Fatalf("completions %v, want each node once", c)
	}
}

func TestCancelStopsTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.g.hold = true
	rep := b.replica(t, "r", 1, 600*time.Millisecond)
	id := b.create(t, rep.engine, 1)[0]
	<-b.g.entered
	if err := rep.store.Cancel(context.Background(), id, "tester"); err != nil {
		t.Fatal(err)
	}
	// The heartbeat finds the lease gone and cancels the node run; nothing
	// more is written for the task.
	time.Sleep(time.Second)
	var status string
	var events int
	if err := b.pool.QueryRow(context.Background(), "SELECT t.status, c.event_seq FROM tasks t JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1", id).Scan(&status, &events); err != nil {
		t.Fatal(err)
	}
	var last string
	if err := b.pool.QueryRow(context.Background(), "SELECT type FROM task_events WHERE task_id = $1 ORDER BY seq DESC LIMIT 1", id).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if status != "cancelled" || last != graph.EventTaskCancelled {
		t.Fatalf("status %s, last event %s", status, last)
	}
	if c := b.completions(t, id); c["slow"] != 0 {
		t.Fatalf("slow completed after cancel: %v", c)
	}
	if n := b.g.cancelled.Load(); n != 1 {
		t.Fatalf("%d node runs cancelled by the heartbeat, want 1", n)
	}
}

// Tasks that became runnable while every worker was busy are claimed as
// soon as a worker frees up, not at the next sweep: their wake-ups arrived
// when the runner could not take them.
func TestBusyRunnerClaimsBacklogWhenFreed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.g.mu.Lock()
	b.g.hold = true
	b.g.mu.Unlock()
	_, e, r := b.lone(t, 1, nil)
	first := b.create(t, e, 1)[0]
	r.Wake()
	<-b.g.entered // the only worker is busy with the first task
	rest := b.create(t, e, 3)
	r.Wake() // arrives while no slot is free
	time.Sleep(50 * time.Millisecond)
	b.g.mu.Lock()
	b.g.hold = false
	b.g.mu.Unlock()
	close(b.g.release)
	for _, id := range append([]string{first}, rest...) {
		b.waitStatus(t, id, graph.StatusSucceeded, 5*time.Second)
	}
}

// countingStore counts the runner's claims.
type countingStore struct {
	runner.Store
	claims atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, owner string, max int, ttl time.Duration) ([]graph.Claim, error) {
	// Counted once done: a count seen means that claim is over.
	defer s.claims.Add(1)
	return s.Store.Claim(ctx, owner, max, ttl)
}

// An announcement of a task the runner claimed after the announced event
// is not news and costs no claim; a later one does.
func TestWakeForSkipsWhatTheClaimConsumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs := &countingStore{}
	_, e, r := b.lone(t, 2, func(s runner.Store) runner.Store { cs.Store = s; return cs })
	id := b.create(t, e, 1)[0]
	r.Wake()
	b.waitStatus(t, id, graph.StatusSucceeded, 5*time.Second)
	settle := func() int64 {
		time.Sleep(100 * time.Millisecond)
		return cs.claims.Load()
	}
	before := settle()
	r.WakeFor(id, 1) // task.created, seq 1: the claim saw it
	if got := settle(); got != before {
		t.Fatalf("claims %d → %d after an announcement the claim consumed", before, got)
	}
	r.WakeFor(id, 1000) // an event after the claim: look
	if got := settle(); got != before+1 {
		t.Fatalf("claims %d → %d after a new announcement, want one more", before, got)
	}
	r.WakeFor("", 0) // unknown: look
	if got := settle(); got != before+2 {
		t.Fatalf("claims %d → %d after an unknown announcement, want one more", before+1, got)
	}
}

// Handoff reserves a worker for a task the caller leases itself (as a
// decision does): the slot is taken until settled; a lease granted runs
// the task, none frees the slot.
func TestHandoffRunsWhatTheCallerLeased(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store, e, r := b.loneIdle(t, 1)
	ctx := context.Background()

	// Nothing granted: the slot comes back.
	lease, settle := r.Handoff()
	if lease == nil || lease.Owner != "r" || lease.TTL != time.Minute {
		t.Fatalf("handoff with a free worker: %+v", lease)
	}
	if again, _ := r.Handoff(); again != nil {
		t.Fatal("a second handoff got the only worker, reserved by the first")
	}
	settle("")
	lease, settle = r.Handoff()
	if lease == nil {
		t.Fatal("the slot of a handoff settled without a lease did not come back")
	}

	// Granted: the runner runs the task with the lease's fence; no claim of
	// its own takes the task (that would move the fence on).
	id := b.create(t, e, 1)[0]
	c, err := store.ClaimTask(ctx, "r", id, time.Minute) // the caller's own lease
	if err != nil || len(c) != 1 {
		t.Fatalf("lease the task: %+v %v", c, err)
	}
	lease.Fence = c[0].Fence
	settle(id)
	settle(id) // settling twice is harmless
	b.waitStatus(t, id, graph.StatusSucceeded, 5*time.Second)
	var fence int64
	if err := b.pool.QueryRow(ctx, "SELECT lease_fence FROM tasks WHERE id = $1", id).Scan(&fence); err != nil {
		t.Fatal(err)
	}
	if fence != lease.Fence {
		t.Fatalf("fence %d after the run, want the lease's %d: the runner claimed the task itself", fence, lease.Fence)
	}
	if r.Executed() != 1 {
		t.Fatalf("executed %d runs, want 1", r.Executed())
	}
}

// lone starts a runner without a hub and without a sweep within the test:
// only Wake, WakeFor, Handoff and freed workers move work. wrap, when
// set, wraps the store the runner sees.
func (b bundle) lone(t *testing.T, workers int, wrap func(runner.Store) runner.Store) (*postgres.Store, *graph.Engine, *runner.Runner) {
	t.Helper()
	store := postgres.NewStore(b.pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{b.g.graph(t)})
	if err != nil {
		t.Fatal(err)
	}
	var rs runner.Store = store
	if wrap != nil {
		rs = wrap(store)
	}
	r := runner.New(rs, e, runner.Config{Owner: "r", Workers: workers, LeaseTTL: time.Minute, MaxSweep: time.Hour})
	r.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	return store, e, r
}

// A handoff settled after Stop began runs nothing here: the lease the
// caller took goes back, so another replica continues the task at once.
func TestHandoffAfterStopHandsTheLeaseBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store, e, r := b.loneIdle(t, 1)
	ctx := context.Background()
	lease, settle := r.Handoff()
	if lease == nil {
		t.Fatal("no handoff from an idle runner")
	}
	id := b.create(t, e, 1)[0]
	c, err := store.ClaimTask(ctx, "r", id, time.Minute)
	if err != nil || len(c) != 1 {
		t.Fatalf("lease the task: %+v %v", c, err)
	}
	lease.Fence = c[0].Fence
	stopped := make(chan struct{})
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r.Stop(sctx)
		close(stopped)
	}()
	<-stopped
	if again, _ := r.Handoff(); again != nil {
		t.Fatal("a stopped runner offered a worker")
	}
	settle(id)
	if r.Executed() != 0 {
		t.Fatalf("a stopped runner ran %d tasks", r.Executed())
	}
	var owner *string
	var expired bool
	if err := b.pool.QueryRow(ctx, "SELECT lease_owner, lease_expires_at < now() FROM tasks WHERE id = $1", id).Scan(&owner, &expired); err != nil {
		t.Fatal(err)
	}
	if owner != nil || !expired {
		t.Fatalf("lease not handed back: owner %v, expired %v", owner, expired)
	}
	// Anyone may claim it now.
	if cs, err := store.Claim(ctx, "other", 1, time.Minute); err != nil || len(cs) != 1 || cs[0].TaskID != id {
		t.Fatalf("claim after the hand-back: %+v %v", cs, err)
	}
}

// loneIdle is lone, returned once the runner's first look for work is
// over: a task created after it is not claimed by the runner unless
// something wakes it (tests that lease tasks themselves need that).
func (b bundle) loneIdle(t *testing.T, workers int) (*postgres.Store, *graph.Engine, *runner.Runner) {
	t.Helper()
	cs := &countingStore{}
	store, e, r := b.lone(t, workers, func(s runner.Store) runner.Store { cs.Store = s; return cs })
	for deadline := time.Now().Add(5 * time.Second); cs.claims.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the runner did not look for work")
		}
		time.Sleep(time.Millisecond)
	}
	return store, e, r
}
