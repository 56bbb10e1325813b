package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TestOutboxSubjects: a claimed batch's subjects, read in one statement,
// are each delivery's own task, interrupt and decision; a task that is
// gone leaves its deliveries without a subject; recorded attempts end the
// rows, and a stale attempt number is reported lost.
func TestOutboxSubjects(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	ctx := context.Background()
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddEndpoint(ctx, notify.Endpoint{URL: "http://127.0.0.1:1/hook", Secret: notify.NewSecret()}, "test"); err != nil {
		t.Fatal(err)
	}
	t1, i1 := graphtest.RunToGate(t, e)
	t2, i2 := graphtest.RunToGate(t, e)
	t3, i3 := graphtest.RunToGate(t, e)
	if _, err := e.Decide(ctx, t1.ID, graph.DecisionInput{InterruptID: i1.ID, Action: "approve", DecidedBy: "alice"}); err != nil {
		t.Fatal(err)
	}

	ds, err := store.ClaimDeliveries(ctx, 100, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ event, task, itr string }
	want := map[key]bool{{notify.EventRaised, t1.ID, i1.ID}: true, {notify.EventDecided, t1.ID, i1.ID}: true,
		{notify.EventRaised, t2.ID, i2.ID}: true, {notify.EventRaised, t3.ID, i3.ID}: true}
	if len(ds) != len(want) {
		t.Fatalf("claimed %d deliveries, want %d: %+v", len(ds), len(want), ds)
	}
	subjs, err := store.Subjects(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if !want[key{d.Event, d.TaskID, d.InterruptID}] {
			t.Errorf("unexpected delivery %+v", d)
		}
		s := subjs[i]
		if s == nil || s.Task.ID != d.TaskID || s.Interrupt == nil || s.Interrupt.ID != d.InterruptID {
			t.Fatalf("delivery %s %s: subject %+v", d.Event, d.TaskID, s)
		}
		decided := d.TaskID == t1.ID
		if (s.Decision != nil) != decided || decided && (s.Decision.Action != "approve" || s.Decision.DecidedBy != "alice") {
			t.Errorf("delivery %s of %s: decision %+v", d.Event, d.TaskID, s.Decision)
		}
	}

	if _, err := pool.Exec(ctx, `DELETE FROM tasks WHERE id = $1`, t2.ID); err != nil {
		t.Fatal(err)
	}
	subjs, err = store.Subjects(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if gone := d.TaskID == t2.ID; (subjs[i] == nil) != gone {
			t.Errorf("after deleting %s: subject of %s %s is %+v", t2.ID, d.Event, d.TaskID, subjs[i])
		}
	}

	// Record: the first failed (to be retried: its body is kept for the
	// retry), the second delivered (its body is not kept); the third,
	// with a stale attempt number (another sender claimed it again), is
	// lost.
	var fs []notify.Finished
	for i := range ds {
		d := ds[i]
		if d.TaskID == t2.ID {
			continue // deleted with its task
		}
		fs = append(fs, notify.Finished{Delivery: &d, Result: notify.Result{State: notify.StateDelivered, StatusCode: 204,
			Payload: []byte(`{"ok":true}`)}})
	}
	if len(fs) != 3 {
		t.Fatalf("%d deliveries to record, want 3", len(fs))
	}
	fs[0].Result = notify.Result{State: notify.StatePending, StatusCode: 500, Error: "the receiver answered 500",
		NextAt: time.Now().Add(time.Hour), Payload: []byte(`{"ok":true}`)}
	stale := fs[len(fs)-1]
	staleD := *stale.Delivery
	staleD.Attempt++
	fs[len(fs)-1] = notify.Finished{Delivery: &staleD, Result: stale.Result}
	lost, err := store.FinishDeliveries(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != staleD.ID {
		t.Fatalf("lost %v, want [%s]", lost, staleD.ID)
	}
	for i, f := range fs[:len(fs)-1] {
		got, err := store.Delivery(ctx, f.Delivery.ID)
		if err != nil {
			t.Fatal(err)
		}
		state, code, body := notify.StateDelivered, 204, ""
		if i == 0 {
			state, code, body = notify.StatePending, 500, `{"ok": true}`
		}
		if got.State != state || len(got.Attempts) != 1 || got.Attempts[0].StatusCode != code || string(got.Payload) != body {
			t.Errorf("recorded %+v, want %s %d body %q", got, state, code, body)
		}
	}
	if got, err := store.Delivery(ctx, staleD.ID); err != nil || got.State != notify.StatePending || len(got.Attempts) != 0 {
		t.Errorf("the lost attempt was recorded: %+v %v", got, err)
	}
}

// TestOutboxBornClaimed: with a sender on the replica, a commit's
// deliveries are written claimed (attempt 1, leased) and handed to it
// after the commit: no claim takes them while the lease runs, a refused
// decision hands nothing, and once the lease lapses any sender claims
// them as attempt 2.
func TestOutboxBornClaimed(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	var mu sync.Mutex
	var handed []notify.Delivery
	store := postgres.NewStore(pool, postgres.Options{Outbox: postgres.Outbox{Lease: time.Second, Take: func(ds []notify.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		handed = append(handed, ds...)
	}}})
	taken := func() []notify.Delivery {
		mu.Lock()
		defer mu.Unlock()
		out := handed
		handed = nil
		return out
	}
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddEndpoint(ctx, notify.Endpoint{URL: "http://127.0.0.1:1/hook", Secret: notify.NewSecret()}, "test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	task, itr := graphtest.RunToGate(t, e)
	ds := taken()
	if len(ds) != 1 || ds[0].Event != notify.EventRaised || ds[0].InterruptID != itr.ID || ds[0].Attempt != 1 ||
		ds[0].NextAt.Before(start.Add(500*time.Millisecond)) {
		t.Fatalf("handed after the raise: %+v", ds)
	}
	if got, err := store.ClaimDeliveries(ctx, 100, time.Minute, nil); err != nil || len(got) != 0 {
		t.Fatalf("claimed while born claimed: %+v %v", got, err)
	}
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: "approve", DecidedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if ds := taken(); len(ds) != 1 || ds[0].Event != notify.EventDecided || ds[0].Attempt != 1 {
		t.Fatalf("handed after the decision: %+v", ds)
	}
	// A second decision on the same interrupt is refused: nothing written,
	// nothing handed.
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: "approve", DecidedBy: "bob"}); err == nil {
		t.Fatal("second decision accepted")
	}
	if ds := taken(); len(ds) != 0 {
		t.Fatalf("handed after a refused decision: %+v", ds)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE attempts = 1 AND state = 'pending'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows born claimed: %d %v", n, err)
	}
	// The sender died: once the lease lapses, any sender takes them.
	var got []notify.Delivery
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		more, err := store.ClaimDeliveries(ctx, 100, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, more...)
	}
	if len(got) != 2 || got[0].Attempt != 2 || got[1].Attempt != 2 {
		t.Fatalf("claimed after the lease: %+v", got)
	}
}

// TestRemoveEndpointTakesItsLog: removing an endpoint deletes its
// deliveries and their attempts (no foreign key cascades them), and
// nobody else's.
func TestRemoveEndpointTakesItsLog(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	ctx := context.Background()
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, u := range []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"} {
		ep, err := store.AddEndpoint(ctx, notify.Endpoint{URL: u, Secret: notify.NewSecret()}, "test")
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep.ID)
	}
	graphtest.RunToGate(t, e)
	ds, err := store.ClaimDeliveries(ctx, 10, time.Minute, nil)
	if err != nil || len(ds) != 2 {
		t.Fatalf("claimed %+v %v", ds, err)
	}
	var fs []notify.Finished
	for i := range ds {
		fs = append(fs, notify.Finished{Delivery: &ds[i], Result: notify.Result{State: notify.StateDelivered, StatusCode: 204}})
	}
	if lost, err := store.FinishDeliveries(ctx, fs); err != nil || len(lost) != 0 {
		t.Fatalf("finish: %v %v", lost, err)
	}
	if err := store.RemoveEndpoint(ctx, eps[0], "admin"); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("%d deliveries left, want the other endpoint's 1", n)
	}
	if n := count(`SELECT count(*) FROM outbox_attempts a WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = a.outbox_id)`); n != 0 {
		t.Errorf("%d attempts of removed deliveries left", n)
	}
	if n := count(`SELECT count(*) FROM outbox_attempts`); n != 1 {
		t.Errorf("%d attempts left, want the other endpoint's 1", n)
	}
}
