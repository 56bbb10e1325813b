package postgres

import (
	"context"
	"fmt"
	"time"
)

// publish reads back the event committed with seq and hands it to the
// sinks. It is best effort: sinks observe, they do not keep the record.
func (s *Store) publish(ctx context.Context, taskID string, seq int64) {
	if len(s.opts.Sinks) == 0 || seq < 1 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	evs, err := s.Events(rctx, taskID, seq-1, 1)
	if err != nil || len(evs) == 0 {
		return
	}
	for _, sink := range s.opts.Sinks {
		sink.Publish(evs)
	}
}

// PendingInterruptCounts counts the pending interrupts by kind.
func (s *Store) PendingInterruptCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.q.InterruptCountPending(ctx)
	if err != nil {
		return nil, fmt.Errorf("count pending interrupts: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Kind] = int(r.Pending)
	}
	if len(rows) > 0 {
		s.foldCounts(ctx, int(rows[0].Deltas))
	}
	return out, nil
}

// TaskCounts counts tasks per status.
func (s *Store) TaskCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.q.TaskCountByStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] = int(r.Tasks)
	}
	if len(rows) > 0 {
		s.foldCounts(ctx, int(rows[0].Deltas))
	}
	return out, nil
}

// foldDeltas is how many count deltas a reader adds up before it folds
// them into row_counts: a few thousand rows sum in about a millisecond.
const foldDeltas = 2000

// foldCounts folds the count deltas when a reader saw many. Best effort:
// a failed fold leaves the deltas, which still count.
func (s *Store) foldCounts(ctx context.Context, deltas int) {
	if deltas < foldDeltas || !s.folding.CompareAndSwap(false, true) {
		return
	}
	defer s.folding.Store(false)
	_ = s.FoldCounts(ctx)
}

// FoldCounts folds the count deltas into row_counts now (readers do it
// when they find many).
func (s *Store) FoldCounts(ctx context.Context) error {
	if err := s.q.RowCountsFold(ctx); err != nil {
		return fmt.Errorf("fold counts: %w", err)
	}
	return nil
}
