package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Periods of the chores.
const (
	// SessionPruneEvery is how often ended desk sessions and old login
	// attempts are deleted.
	SessionPruneEvery = time.Hour
	// AnalyticsFoldEvery is how often the analytics deltas (a row per
	// decision) are folded into the rollups; reports fold too.
	AnalyticsFoldEvery = time.Minute
	// RetentionEvery is how often the checkpoint history and the finished
	// notification rows are pruned.
	RetentionEvery = time.Hour
	// historyOverlap: a history prune looks again at the tasks that ended
	// this long before the previous run's cutoff, for a task whose ending
	// committed late.
	historyOverlap = time.Hour
)

// SessionPruner deletes ended sessions and old login attempts
// (auth.Service).
type SessionPruner interface {
	// Prune deletes what has ended.
	Prune(ctx context.Context) error
}

var _ SessionPruner = (*auth.Service)(nil)

// SessionPrune deletes ended desk sessions and old login attempts, at
// start and then hourly.
func SessionPrune(p SessionPruner, log *slog.Logger) *Service {
	return New(Config{Name: "session prune", Every: SessionPruneEvery, RunAtStart: true, Logger: log,
		Run: func(ctx context.Context) {
			if err := p.Prune(ctx); err != nil && ctx.Err() == nil {
				log.Warn("pruning sessions and login attempts", "error", err)
			}
		}})
}

// AnalyticsFolder folds the analytics deltas into the rollups
// (postgres.Store).
type AnalyticsFolder interface {
	// FoldAnalytics folds the deltas and says how many it folded.
	FoldAnalytics(ctx context.Context) (int, error)
}

// AnalyticsFold folds the analytics deltas into the rollups once a minute.
func AnalyticsFold(f AnalyticsFolder, log *slog.Logger) *Service {
	return New(Config{Name: "analytics fold", Every: AnalyticsFoldEvery, Logger: log,
		Run: func(ctx context.Context) {
			if n, err := f.FoldAnalytics(ctx); err != nil && ctx.Err() == nil {
				log.Warn("folding analytics", "error", err)
			} else if n > 0 {
				log.Debug("folded analytics", "decisions_and_closings", n)
			}
		}})
}

// HistoryPruner prunes the checkpoint history (postgres.Store).
type HistoryPruner interface {
	// PruneHistory prunes as p says. Errors: postgres.ErrPruneBusy.
	PruneHistory(ctx context.Context, p postgres.HistoryPrune) (postgres.HistoryPruned, error)
}

// HistoryRetention prunes the checkpoint history of tasks that ended
// longer ago than retention, at start and then hourly. The first run looks
// at every task that ended; a later one at those that ended since the last
// run that completed. Replicas take turns (one prune at a time per
// database).
func HistoryRetention(p HistoryPruner, retention time.Duration, log *slog.Logger) *Service {
	var since time.Time
	return New(Config{Name: "history retention", Every: RetentionEvery, RunAtStart: true, Logger: log,
		Run: func(ctx context.Context) {
			start := time.Now()
			before := start.Add(-retention)
			out, err := p.PruneHistory(ctx, postgres.HistoryPrune{Since: since, Before: before, Actor: "retention"})
			if err == nil {
				since = before.Add(-historyOverlap)
			}
			switch {
			case errors.Is(err, postgres.ErrPruneBusy):
				log.Debug("checkpoint history: another replica is pruning it")
			case err != nil && ctx.Err() == nil:
				log.Warn("pruning checkpoint history", "error", err, "rows", out.Rows, "tasks", out.Tasks)
			case err != nil:
				// Stopped by shutdown; what was deleted stays deleted.
				log.Info("pruning checkpoint history stopped by shutdown", "rows", out.Rows, "tasks", out.Tasks)
			case out.Rows > 0:
				log.Info("pruned checkpoint history", "rows", out.Rows, "tasks", out.Tasks,
					"ended_before", before.UTC().Format(time.RFC3339), "took", time.Since(start).Round(time.Millisecond))
			default:
				log.Debug("checkpoint history: nothing to prune", "ended_before", before.UTC().Format(time.RFC3339))
			}
		}})
}

// NotificationPruner prunes finished notification rows (postgres.Store).
type NotificationPruner interface {
	// PruneNotifications prunes as p says. Errors:
	// postgres.ErrOutboxPruneBusy.
	PruneNotifications(ctx context.Context, p postgres.NotificationPrune) (postgres.NotificationsPruned, error)
}

// OutboxRetention deletes the notification rows whose work is over —
// deliveries delivered or failed, with their attempts, and action links
// used or expired — once they are older than retention, at start and then
// hourly. Pending deliveries stay whatever their age. Replicas take turns
// (one prune at a time per database).
func OutboxRetention(p NotificationPruner, retention time.Duration, log *slog.Logger) *Service {
	return New(Config{Name: "outbox retention", Every: RetentionEvery, RunAtStart: true, Logger: log,
		Run: func(ctx context.Context) {
			start := time.Now()
			before := start.Add(-retention)
			out, err := p.PruneNotifications(ctx, postgres.NotificationPrune{Before: before})
			attrs := []any{"deliveries", out.Deliveries, "attempts", out.Attempts, "action_links", out.Links}
			switch {
			case errors.Is(err, postgres.ErrOutboxPruneBusy):
				log.Debug("notification rows: another replica is pruning them")
			case err != nil && ctx.Err() == nil:
				log.Warn("pruning notification rows", append(attrs, "error", err)...)
			case err != nil:
				log.Info("pruning notification rows stopped by shutdown", attrs...)
			case out.Deliveries+out.Links > 0:
				log.Info("pruned notification rows", append(attrs, "older_than", before.UTC().Format(time.RFC3339),
					"took", time.Since(start).Round(time.Millisecond))...)
			default:
				log.Debug("notification rows: nothing to prune", "older_than", before.UTC().Format(time.RFC3339))
			}
		}})
}
