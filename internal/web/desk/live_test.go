package desk

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// bundle is what a test of the desk's insides needs: a fresh database,
// the engine with the feature workflow on the stub executor, a running
// hub and runner, and the desk over them (not mounted on a server: the
// HTTP tests of the desk are internal/web's).
type bundle struct {
	t      testing.TB
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *graph.Engine
	run    *runner.Runner
	desk   *desk
}

func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	cs := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, cs)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool)
	log := slog.New(slog.DiscardHandler)
	notifyCtx, stopNotify := context.WithCancel(ctx)
	store.StartNotifier(notifyCtx, log)
	t.Cleanup(stopNotify)
	fw, err := feature.New(featuretest.NewStub(""), feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	engine, err := graph.NewEngine(store, []graph.Workflow{fw}, graph.WithLogger(log))
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	hub := live.NewHub(cs, store, log)
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	select {
	case <-hub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("hub never listened")
	}
	run := runner.New(store, engine, runner.Config{Owner: "desk-test", Workers: 2, LeaseTTL: 5 * time.Second, Logger: log})
	hub.OnRunnable(run.WakeFor)
	run.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		run.Stop(ctx)
		stopHub()
		<-hubDone
	})
	h := New(Deps{Engine: engine, Store: store, Hub: hub, Auth: auth.NewService(auth.Config{Store: store}),
		Decider: auth.NewDecider(engine, store, auth.DefaultPolicy(), log, auth.WithWorker(run)),
		Wake:    run.Wake, Sockets: socket.NewGroup(), Logger: log})
	return &bundle{t: t, pool: pool, store: store, engine: engine, run: run, desk: h.d}
}

// createFeature starts a feature task with no gates but the default ones.
func (b *bundle) createFeature(title string) string {
	b.t.Helper()
	t, err := b.engine.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: title,
		Input:   json.RawMessage(`{"description":"` + featuretest.DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":{}}`), CreatedBy: "test"})
	if err != nil {
		b.t.Fatalf("create: %v", err)
	}
	b.run.Wake()
	return t.ID
}

// waitPending waits until the task waits on an interrupt of kind.
func (b *bundle) waitPending(id, kind string) *graph.Interrupt {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		itr, err := b.store.PendingInterrupt(context.Background(), id)
		if err != nil {
			b.t.Fatalf("pending: %v", err)
		}
		if itr != nil && itr.Kind == kind {
			return itr
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.t.Fatalf("task %s never waited on %s", id, kind)
	return nil
}

// TestLiveFeedDropsSlowPage: a page whose queue is full when a broadcast
// comes is dropped (its socket then closes with 1013 and the page
// reconnects from the seq it has), and only it: a page that keeps up
// gets every event to the next gate, in order.
func TestLiveFeedDropsSlowPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.createFeature("Slow page")
	prd := e.waitPending(id, "prd")
	// The test holds the feeds' ends that a socket would hold.
	d := e.desk
	ctx := context.Background()
	snap, err := d.tasks.get(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq, ik := snap.data.lastSeq, interruptKey(snap.data)

	slow := make(chan liveMsg, 1) // never read
	slowGone, slowLeave, err := d.feeds.join(ctx, id, seq, ik, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer slowLeave()
	fast := make(chan liveMsg, liveOut)
	fastGone, fastLeave, err := d.feeds.join(ctx, id, seq, ik, fast)
	if err != nil {
		t.Fatal(err)
	}
	defer fastLeave()
	var seqs []int64
	last := seq
	in := graph.DecisionInput{InterruptID: prd.ID, Action: "reject", DecidedBy: "ann"}
	in.Feedback = "Once more, please."
	if _, err := e.engine.Decide(ctx, id, in); err != nil {
		t.Fatalf("decide: %v", err)
	}
	e.run.Wake()
	e.waitPending(id, "prd")
	var want int64
	if err := e.pool.QueryRow(ctx, `SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1`, id).Scan(&want); err != nil {
		t.Fatal(err)
	}
	dropped := false
	deadline := time.After(20 * time.Second)
	for last < want || !dropped {
		select {
		case m := <-fast:
			for _, it := range m.items {
				if it.seq > last {
					seqs = append(seqs, it.seq)
					last = it.seq
				}
			}
		case err := <-slowGone:
			if !errors.Is(err, errSlowPage) {
				t.Fatalf("the slow page went with %v, want errSlowPage", err)
			}
			dropped = true
			slowGone = nil
		case err := <-fastGone:
			t.Fatalf("the page that keeps up was dropped: %v", err)
		case <-deadline:
			t.Fatalf("after 20 s: slow page dropped %v; the other at seq %d of %d", dropped, last, want)
		}
	}
	for i, n := range seqs {
		if n != seq+int64(i)+1 {
			t.Fatalf("the page that keeps up got seqs %v, want %d..%d each once", seqs, seq+1, want)
		}
	}
}
