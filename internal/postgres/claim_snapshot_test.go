package postgres_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TaskClaim's rows are TaskSnapshot's columns, in order, then the event
// seq: the store copies them into a TaskSnapshotRow (snapshotRow).
func TestClaimRowIsSnapshotRow(t *testing.T) {
	claim, snap := reflect.TypeFor[dbsqlc.TaskClaimRow](), reflect.TypeFor[dbsqlc.TaskSnapshotRow]()
	if claim.NumField() != snap.NumField()+1 {
		t.Fatalf("TaskClaimRow has %d fields, TaskSnapshotRow %d: want one more (event_seq)", claim.NumField(), snap.NumField())
	}
	for i := range snap.NumField() {
		c, s := claim.Field(i), snap.Field(i)
		if c.Name != s.Name || c.Type != s.Type {
			t.Errorf("column %d: TaskClaim has %s %s, TaskSnapshot %s %s", i+1, c.Name, c.Type, s.Name, s.Type)
		}
	}
	if last := claim.Field(claim.NumField() - 1); last.Name != "EventSeq" || last.Type != reflect.TypeFor[int64]() {
		t.Errorf("last column: %s %s, want EventSeq int64", last.Name, last.Type)
	}
}

// A claim carries each task's snapshot, the one LoadRun reads after the
// claim: a new task, a task whose decision made it runnable (its interrupt
// and decision), a task whose lease expired mid-run, a state with a large
// field kept apart.
func TestClaimCarriesTheSnapshot(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle(), graphtest.Linear(3), sizedGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	decided, in := graphtest.RunToGate(t, e)
	if _, err := e.Decide(ctx, decided.ID, graph.DecisionInput{InterruptID: in.ID, Action: graph.ActionReject, Feedback: "again", Task: decided}); err != nil {
		t.Fatal(err)
	}
	expired, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := store.Claim(ctx, "w0", 8, time.Millisecond)
	if err != nil || len(first) != 2 {
		t.Fatalf("first claim: %d claims, %v", len(first), err)
	}
	fresh, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	large, err := e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the first claims' leases expire

	// A store of its own: no blob of the large task is cached.
	claims, err := postgres.NewStore(pool, postgres.Options{}).Claim(ctx, "w1", 8, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{decided.ID: "decided", expired.ID: "expired lease", fresh.ID: "new", large.ID: "large field"}
	if len(claims) != len(want) {
		t.Fatalf("%d claims, want %d", len(claims), len(want))
	}
	for _, c := range claims {
		what := want[c.TaskID]
		if c.Snapshot == nil {
			t.Errorf("%s: claim without a snapshot", what)
			continue
		}
		got, err := postgres.NewStore(pool, postgres.Options{}).LoadRun(ctx, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.Snapshot, got) {
			t.Errorf("%s: claim's snapshot\n%+v\nLoadRun's\n%+v", what, *c.Snapshot, *got)
		}
		if c.Snapshot.Task.Fence != c.Fence || c.Snapshot.Task.Status != graph.StatusRunning {
			t.Errorf("%s: snapshot fence %d status %s, claim fence %d", what, c.Snapshot.Task.Fence, c.Snapshot.Task.Status, c.Fence)
		}
		switch c.TaskID {
		case decided.ID:
			if c.Snapshot.Interrupt == nil || c.Snapshot.Decision == nil || c.Snapshot.Decision.Feedback != "again" {
				t.Errorf("decided: interrupt %+v decision %+v", c.Snapshot.Interrupt, c.Snapshot.Decision)
			}
		case large.ID:
			if len(c.Snapshot.Checkpoint.Fields) != 1 {
				t.Errorf("large field: %d fields apart", len(c.Snapshot.Checkpoint.Fields))
			}
		}
		// The run starts from the claim's snapshot.
		if out, err := e.RunFrom(ctx, c.Snapshot, c.Fence, nil); err != nil || out.Status == graph.StatusFailed {
			t.Errorf("%s: run from the claim: %+v %v", what, out, err)
		}
	}
}
