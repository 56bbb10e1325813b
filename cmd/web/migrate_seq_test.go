package main

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// seqOnCheckpointVersion is the migration that moved the per-task event
// counter from the task row to the checkpoint row (00100).
const seqOnCheckpointVersion = 100

// Tasks waiting at their gates cross 00100 both ways: down, each task row
// holds its last event's seq again; up, the checkpoint row does; then every
// task resumes on its decision, and its events stay gap-free.
func TestMigrationEventSeqResumesWaitingTasks(t *testing.T) {
	r := newMigrationRig(t)
	ctx, pool := r.ctx, r.pool
	e := r.engine(t, postgres.NewStore(pool, postgres.Options{}))
	tasks := runToGates(ctx, t, e, gateTasks(t), nil)
	lastSeq := func(id string) (n int64) {
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM task_events WHERE task_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	r.migrateBelow(t, seqOnCheckpointVersion)
	for _, w := range tasks {
		var seq int64
		if err := pool.QueryRow(ctx, `SELECT event_seq FROM tasks WHERE id = $1`, w.id).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if seq != lastSeq(w.id) || seq == 0 {
			t.Errorf("task %s: event_seq %d on its row after migrating down, want %d", w.id, seq, lastSeq(w.id))
		}
	}
	r.migrateUp(t)
	e = r.engine(t, postgres.NewStore(pool, postgres.Options{}))
	for _, w := range tasks {
		decideAndRun(ctx, t, e, w, nil)
		var n, seq int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_events WHERE task_id = $1),
			(SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1)`, w.id).Scan(&n, &seq); err != nil {
			t.Fatal(err)
		}
		if n != lastSeq(w.id) || seq != n {
			t.Errorf("task %s: %d events, last seq %d, counter %d: want gap-free", w.id, n, lastSeq(w.id), seq)
		}
	}
}
