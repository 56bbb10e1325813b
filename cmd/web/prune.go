package main

// gatehouse prune: retention of the checkpoint history, from the terminal;
// gatehouse serve does the same hourly with GATEHOUSE_HISTORY_RETENTION.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const pruneSynopsis = `prune --older-than DURATION [--dry-run]

Deletes the intermediate checkpoints (checkpoint_history) of tasks that ended
(succeeded, failed or cancelled) more than DURATION ago, e.g. 720h for 30 days.
Kept for every task: its first checkpoint, every checkpoint at an interrupt or
of a decision (the states people reviewed, and where a task can be forked),
and its last one. Tasks that have not ended keep everything; events (the audit
trail), decisions, interrupts, artifacts and current checkpoints are never
touched. Deletes in chunks of 10000 rows, one transaction each; one prune at a
time per database.

Flags:`

// positiveDuration is a flag that takes a Go duration greater than zero.
type positiveDuration struct{ d time.Duration }

func (p *positiveDuration) String() string {
	if p == nil || p.d == 0 {
		return ""
	}
	return p.d.String()
}

func (p *positiveDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 720h (hours: d is not a unit)")
	}
	p.d = d
	return nil
}

func cmdPrune(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("prune", pruneSynopsis, stdout)
	var olderThan positiveDuration
	fs.Var(&olderThan, "older-than", "prune tasks that ended more than `DURATION` ago (e.g. 720h)")
	dryRun := fs.Bool("dry-run", false, "count what would be deleted; delete nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("prune takes no arguments, got %q", fs.Arg(0))}
	}
	if olderThan.d == 0 {
		return usageError{"prune needs --older-than DURATION (e.g. 720h: tasks that ended more than 30 days ago)"}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 2, "run")
	if err != nil {
		return err
	}
	defer pool.Close()
	before := time.Now().Add(-olderThan.d)
	out, err := postgres.NewStore(pool).PruneHistory(ctx, postgres.HistoryPrune{Before: before, DryRun: *dryRun,
		Actor: cliActor(getenv)})
	ended := before.UTC().Format(time.RFC3339)
	switch {
	case errors.Is(err, postgres.ErrPruneBusy):
		return fmt.Errorf("%w (a replica with GATEHOUSE_HISTORY_RETENTION, or another gatehouse prune); try again later", err)
	case err != nil && out.Rows > 0:
		fmt.Fprintf(stdout, "deleted %d checkpoint_history rows of %d tasks that ended before %s, then stopped\n",
			out.Rows, out.Tasks, ended)
		return err
	case err != nil:
		return err
	case *dryRun:
		fmt.Fprintf(stdout, "would delete %d checkpoint_history rows of %d tasks that ended before %s (dry run: nothing deleted)\n",
			out.Rows, out.Tasks, ended)
	default:
		fmt.Fprintf(stdout, "deleted %d checkpoint_history rows of %d tasks that ended before %s\n", out.Rows, out.Tasks, ended)
	}
	return nil
}

// pruneEvery is how often serve prunes the checkpoint history.
const pruneEvery = time.Hour

// pruneOverlap: a run looks again at the tasks that ended this long before
// the previous run's cutoff, for a task whose ending committed late.
const pruneOverlap = time.Hour

// pruneHistory prunes the checkpoint history of tasks that ended longer
// ago than retention, at once and then hourly, until ctx ends. The first
// run looks at every task that ended; a later one at those that ended
// since the last run that completed. Replicas take turns (one prune at a
// time per database).
func pruneHistory(ctx context.Context, store *postgres.Store, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	var since time.Time
	for {
		start := time.Now()
		before := start.Add(-retention)
		out, err := store.PruneHistory(ctx, postgres.HistoryPrune{Since: since, Before: before, Actor: "retention"})
		if err == nil {
			since = before.Add(-pruneOverlap)
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneNotifications deletes the notification rows whose work is over —
// deliveries delivered or failed, with their attempts, and action links
// used or expired — once they are older than retention, at once and then
// hourly, until ctx ends. Pending deliveries stay whatever their age.
// Replicas take turns (one prune at a time per database).
func pruneNotifications(ctx context.Context, store *postgres.Store, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		start := time.Now()
		before := start.Add(-retention)
		out, err := store.PruneNotifications(ctx, postgres.NotificationPrune{Before: before})
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
