package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

type recordingSink struct {
	mu  sync.Mutex
	evs []graph.Event
}

func (s *recordingSink) Publish(evs []graph.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, evs...)
}

func TestStoreObservability(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	eng := b.engine(t)
	gated := json.RawMessage(`{"gates":{}}`)
	waiting, err := eng.Create(ctx, graph.NewTask{Workflow: "counter", Title: "w", Options: gated})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := eng.Create(ctx, graph.NewTask{Workflow: "counter", Title: "q", Options: gated})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ClaimTask", func(t *testing.T) {
		cs, err := b.store.ClaimTask(ctx, "me", waiting.ID, time.Minute)
		if err != nil || len(cs) != 1 || cs[0].TaskID != waiting.ID {
			t.Fatalf("claim: %v %+v", err, cs)
		}
		again, err := b.store.ClaimTask(ctx, "other", waiting.ID, time.Minute)
		if err != nil || len(again) != 0 {
			t.Fatalf("claim of a leased task: %v %+v", err, again)
		}
		if out, err := eng.Run(ctx, waiting.ID, cs[0].Fence); err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run: %v %+v", err, out)
		}
		if none, err := b.store.ClaimTask(ctx, "me", waiting.ID, time.Minute); err != nil || len(none) != 0 {
			t.Fatalf("claim of a waiting task: %v %+v", err, none)
		}
	})

	t.Run("PendingInterruptCounts", func(t *testing.T) {
		got, err := b.store.PendingInterruptCounts(ctx)
		if err != nil || len(got) != 1 || got["review"] != 1 {
			t.Fatalf("counts %v, %v; want review=1", got, err)
		}
	})

	t.Run("SinkHearsCancelAndRetry", func(t *testing.T) {
		sink := &recordingSink{}
		store := b.store.With(postgres.Options{Sinks: []graph.EventSink{sink}})
		if err := store.Cancel(ctx, queued.ID, "tester"); err != nil {
			t.Fatal(err)
		}
		if err := store.Cancel(ctx, waiting.ID, "tester"); err != nil {
			t.Fatal(err)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.evs) != 2 || sink.evs[0].Type != graph.EventTaskCancelled || sink.evs[0].TaskID != queued.ID ||
			sink.evs[0].Seq < 2 || sink.evs[1].TaskID != waiting.ID {
			t.Fatalf("sink got %+v", sink.evs)
		}
		if got, _ := b.store.PendingInterruptCounts(ctx); len(got) != 0 {
			t.Fatalf("pending after cancel: %v", got)
		}
	})
}
