package desk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/servetest"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// bundle is what a test of the desk's insides needs: a replica on a fresh
// database (the feature workflow on the stub executor, a runner) and the
// desk over it, not mounted on a server: the desk's HTTP tests are
// internal/web's.
type bundle struct {
	t testing.TB
	*servetest.Replica
	desk *desk
}

func setup(t testing.TB) *bundle {
	t.Helper()
	fw, err := feature.New(featuretest.NewStub(""), feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	r := servetest.NewReplica(t, servetest.ReplicaOptions{Workflows: []graph.Workflow{fw}, Workers: 2,
		Owner: "desk-test", LeaseTTL: 5 * time.Second})
	h := New(Deps{Engine: r.Engine, Store: r.Store, Hub: r.Hub, Auth: auth.NewService(auth.Config{Store: r.Store}),
		Decider: auth.NewDecider(r.Engine, r.Store, auth.DefaultPolicy(), nil, auth.WithWorker(r.Runner)),
		Wake:    r.Wake, Sockets: socket.NewGroup()})
	return &bundle{t: t, Replica: r, desk: h.d}
}

// createFeature starts a feature task with the feature's default gates.
func (b *bundle) createFeature(title string) string {
	b.t.Helper()
	id := featuretest.Create(b.t, b.Engine, title)
	b.Wake()
	return id
}

// TestLiveFeedDropsSlowPage: a page whose queue is full when a broadcast
// comes is dropped (its socket then closes with 1013 and the page
// reconnects from the seq it has), and only it: a page that keeps up
// gets every event to the next gate, in order.
func TestLiveFeedDropsSlowPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.createFeature("Slow page")
	prd := e.WaitPending(t, id, "prd")
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
	if _, err := e.Engine.Decide(ctx, id, in); err != nil {
		t.Fatalf("decide: %v", err)
	}
	e.Wake()
	e.WaitPending(t, id, "prd")
	var want int64
	if err := e.Pool.QueryRow(ctx, `SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1`, id).Scan(&want); err != nil {
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
