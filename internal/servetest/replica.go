package servetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/runner"
)

// Replica is one replica of the product in process, on a fresh database,
// for tests that drive it from inside: the store (its notifier
// started), the engine over the test's workflows, the live hub
// (listening) and, with workers, the runner. The HTTP server is the
// test's own, built over these parts: servetest does not import
// internal/web, so the web packages' tests may use it too. Everything
// stops at the test's cleanup.
type Replica struct {
	DatabaseURL string
	Pool        *pgxpool.Pool
	Store       *postgres.Store
	Engine      *graph.Engine
	Hub         *live.Hub
	// Runner runs the tasks (ReplicaOptions.Workers > 0); nil: the test
	// advances them itself.
	Runner *runner.Runner
}

// ReplicaOptions say what a Replica runs.
type ReplicaOptions struct {
	// Workflows are the engine's.
	Workflows []graph.Workflow
	// Engine are further options of the engine (a raise hook).
	Engine []graph.EngineOption
	// HubSink makes the hub the engine's sink too, as serve does: this
	// replica's own events reach it straight from the commit.
	HubSink bool
	// Workers are the runner's workers; 0: no runner.
	Workers int
	// Owner names the runner (default "test"); LeaseTTL is its lease
	// (default 15 s).
	Owner    string
	LeaseTTL time.Duration
	// Logger is the replica's log (nil: none).
	Logger *slog.Logger
	// Store are the store's Options (what its commits write to the
	// outbox).
	Store postgres.Options
}

// NewReplica starts a replica on a fresh database.
func NewReplica(t testing.TB, o ReplicaOptions) *Replica {
	t.Helper()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx := context.Background()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool, o.Store)
	notifyCtx, stopNotify := context.WithCancel(ctx)
	store.StartNotifier(notifyCtx, log)
	t.Cleanup(stopNotify)
	hub := live.NewHub(url, store, log.With("component", "live"))
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	select {
	case <-hub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("hub never listened")
	}
	opts := append([]graph.EngineOption{graph.WithLogger(log)}, o.Engine...)
	if o.HubSink {
		opts = append(opts, graph.WithSink(hub))
	}
	engine, err := graph.NewEngine(store, o.Workflows, opts...)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	r := &Replica{DatabaseURL: url, Pool: pool, Store: store, Engine: engine, Hub: hub}
	if o.Workers > 0 {
		owner, ttl := o.Owner, o.LeaseTTL
		if owner == "" {
			owner = "test"
		}
		if ttl <= 0 {
			ttl = 15 * time.Second
		}
		r.Runner = runner.New(store, engine, runner.Config{Owner: owner, Workers: o.Workers, LeaseTTL: ttl, Logger: log})
		hub.OnRunnable(r.Runner.WakeFor)
		r.Runner.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r.Runner.Stop(ctx)
		})
	}
	return r
}

// Wake wakes the runner, if any: a task became runnable here.
func (r *Replica) Wake() {
	if r.Runner != nil {
		r.Runner.Wake()
	}
}

// WaitPending waits up to 30 s until the task waits on an interrupt of
// kind, and returns it.
func (r *Replica) WaitPending(t testing.TB, taskID, kind string) *graph.Interrupt {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		itr, err := r.Store.PendingInterrupt(context.Background(), taskID)
		if err != nil {
			t.Fatalf("pending: %v", err)
		}
		if itr != nil && itr.Kind == kind {
			return itr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s never waited on %s", taskID, kind)
	return nil
}
