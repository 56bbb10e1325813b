package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TestSenderSendsHandedBurst: deliveries born claimed by this replica's
// commits are sent by its sender without a claim (every row is on its
// first attempt), a burst larger than the sender's slots included: those
// without a slot wait for one, not for their lease.
func TestSenderSendsHandedBurst(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	ctx := context.Background()
	var got, inFlight, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if _, err := store.AddEndpoint(ctx, notify.Endpoint{URL: srv.URL, Secret: notify.NewSecret()}, "test"); err != nil {
		t.Fatal(err)
	}
	body := func(event string, at time.Time, s *notify.Subject) (json.RawMessage, error) {
		return json.Marshal(map[string]string{"type": event, "task": s.Task.ID})
	}
	sender := notify.NewSender(notify.Config{Store: store, InFlight: 4, PerDestination: 2, HandLease: time.Minute,
		Poll: time.Hour, Channels: map[string]notify.Channel{notify.ChannelWebhook: notify.NewWebhooks(store, body, true)}})
	store = store.With(postgres.Options{Outbox: postgres.Outbox{}.WithSender(sender)})
	sender.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sender.Stop(ctx)
	}()
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	const tasks = 12
	for range tasks {
		graphtest.RunToGate(t, e)
	}
	deadline := time.Now().Add(15 * time.Second)
	for got.Load() < tasks && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.Load() != tasks {
		t.Fatalf("%d of %d deliveries arrived", got.Load(), tasks)
	}
	if most.Load() > 2 {
		t.Errorf("%d deliveries at once to one endpoint, want at most 2", most.Load())
	}
	var delivered, first int
	deadline = time.Now().Add(10 * time.Second)
	for delivered < tasks && time.Now().Before(deadline) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE attempts = 1) FROM outbox`).
			Scan(&delivered, &first); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if delivered != tasks || first != tasks {
		t.Fatalf("%d delivered, %d on their first attempt; want %d each", delivered, first, tasks)
	}
}

// TestSenderHandsBackOnStop: deliveries handed to a sender that stops
// before sending them (or after it stopped) are handed back: due at once
// for any sender, on their first attempt still, not held for their lease.
func TestSenderHandsBackOnStop(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	ctx := context.Background()
	if _, err := store.AddEndpoint(ctx, notify.Endpoint{URL: "http://127.0.0.1:1/hook", Secret: notify.NewSecret()}, "test"); err != nil {
		t.Fatal(err)
	}
	// Never started: what it is handed waits, as it would for a slot.
	sender := notify.NewSender(notify.Config{Store: store, HandLease: time.Hour,
		Channels: map[string]notify.Channel{notify.ChannelWebhook: notify.NewWebhooks(store, nil, true)}})
	store = store.With(postgres.Options{Outbox: postgres.Outbox{}.WithSender(sender)})
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	graphtest.RunToGate(t, e)
	if ds, err := store.ClaimDeliveries(ctx, 10, time.Minute, nil); err != nil || len(ds) != 0 {
		t.Fatalf("claimed while handed: %+v %v", ds, err)
	}
	sender.Stop(ctx)
	graphtest.RunToGate(t, e) // handed to a stopped sender
	ds, err := store.ClaimDeliveries(ctx, 10, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Attempt != 1 || ds[1].Attempt != 1 {
		t.Fatalf("after the stop, claimed %+v; want both, on their first attempt", ds)
	}
}
