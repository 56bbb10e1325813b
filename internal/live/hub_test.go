package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

func setup(t *testing.T) (*graph.Engine, *live.Hub, *postgres.Store) {
	t.Helper()
	url, _, store, e := newStore(t)
	return e, startHub(t, url, store), store
}

// newStore is a fresh database with a store and an engine of linear
// tasks, and no hub yet.
func newStore(t *testing.T) (string, *pgxpool.Pool, *postgres.Store, *graph.Engine) {
	t.Helper()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.Linear(5)})
	if err != nil {
		t.Fatal(err)
	}
	return url, pool, store, e
}

// startHub runs a hub on url until the test ends, once it listens.
func startHub(t *testing.T, url string, store *postgres.Store) *live.Hub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hub := live.NewHub(url, store, nil)
	go hub.Run(ctx)
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub not listening")
	}
	return hub
}

// Events committed by any writer reach a subscriber through NOTIFY, in seq
// order, announced once per commit.
func TestHubDeliversCommittedEvents(t *testing.T) {
	t.Parallel()
	e, hub, _ := setup(t)
	ctx := context.Background()
	all := hub.SubscribeAll()
	defer all.Close()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, task.ID, 0); err != nil {
		t.Fatal(err)
	}
	var got []graph.Event
	timeout := time.After(10 * time.Second)
	for len(got) == 0 || got[len(got)-1].Type != graph.EventTaskCompleted {
		select {
		case ev, ok := <-all.C:
			if !ok {
				t.Fatalf("subscription dropped: %s", all.Dropped)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("got %d events, no task.completed", len(got))
		}
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) || ev.TaskID != task.ID {
			t.Fatalf("event %d: seq %d task %s", i, ev.Seq, ev.TaskID)
		}
	}
}

// Follow replays from the table, then goes live, with no gap and no repeat.
func TestFollowReplaysThenLive(t *testing.T) {
	t.Parallel()
	e, hub, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	var got []graph.Event
	done := make(chan error, 1)
	go func() {
		_, err := hub.Follow(ctx, task.ID, 0, func(ev graph.Event) error {
			got = append(got, ev)
			if ev.Type == graph.EventTaskCompleted {
				return errStop
			}
			return nil
		})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := e.Run(ctx, task.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != errStop {
		t.Fatalf("follow: %v", err)
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	if got[0].Type != graph.EventTaskCreated {
		t.Fatalf("first event %s", got[0].Type)
	}
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// Run ends soon after its context does, while it waits for a notification
// (the wait is ended by the listening connection's deadline), and closes
// the subscriptions.
func TestHubRunEndsWithItsContext(t *testing.T) {
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	hub := live.NewHub(url, postgres.NewStore(pool, postgres.Options{}), nil)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { hub.Run(ctx); close(ended) }()
	<-hub.Ready()
	sub := hub.SubscribeAll()
	time.Sleep(50 * time.Millisecond) // waiting for a notification now
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end 5 s after its context")
	}
	if _, open := <-sub.C; open {
		t.Fatal("a subscription is still open after Run ended")
	}
}

// One notification may announce the ranges of several tasks, joined by
// spaces (a notifier's window): the hub delivers each. The tasks are made
// before the hub listens, so only that notification announces them.
func TestHubReadsJoinedAnnouncements(t *testing.T) {
	t.Parallel()
	url, pool, store, e := newStore(t)
	ctx := context.Background()
	var ids []string
	for range 2 {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	hub := startHub(t, url, store)
	all := hub.SubscribeAll()
	defer all.Close()
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", live.ChannelEvents, ids[0]+":1:1 "+ids[1]+":1:1"); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case ev, ok := <-all.C:
			if !ok {
				t.Fatalf("subscription dropped: %s", all.Dropped)
			}
			if ev.Type == graph.EventTaskCreated {
				got[ev.TaskID] = true
			}
		case <-timeout:
			t.Fatalf("delivered the creation of %v, want %v", got, ids)
		}
	}
}
