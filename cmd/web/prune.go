package main

// gatehouse prune: retention of the checkpoint history, from the terminal;
// gatehouse serve does the same hourly with GATEHOUSE_HISTORY_RETENTION
// (internal/maintenance).

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	out, err := postgres.NewStore(pool, postgres.Options{}).PruneHistory(ctx, postgres.HistoryPrune{Before: before, DryRun: *dryRun,
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
