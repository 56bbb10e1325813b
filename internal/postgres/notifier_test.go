package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// TestNotifierStopSendsWhatIsQueued: a commit's announcement is queued for
// the notifier service, and Stop returns only once it is sent.
func TestNotifierStopSendsWhatIsQueued(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+postgres.ChannelRunnable); err != nil {
		t.Fatal(err)
	}
	n := b.store.Notifier(nil)
	n.Start()
	task, err := b.engineOn(t, []graph.Workflow{testGraph(t)}).Create(ctx, graph.NewTask{Workflow: testGraph(t).Name()})
	if err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelWait()
	got, err := conn.Conn().WaitForNotification(waitCtx)
	if err != nil {
		t.Fatalf("no announcement sent by the time Stop returned: %v", err)
	}
	if !strings.HasPrefix(got.Payload, task.ID) {
		t.Errorf("announcement %q, want one of task %s", got.Payload, task.ID)
	}
}
