package main

import (
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// fenceOnCheckpointVersion is the migration that copies each task's fence
// to its checkpoint row, where a quiet step checks it (00101).
const fenceOnCheckpointVersion = 101

// Tasks claimed (their fences moved on) and waiting at their gates cross
// 00101 down and up: up, each checkpoint row carries its task's fence, and
// every task is claimed again and resumes on its decision through quiet
// commits checked against that copy.
func TestMigrationFenceOnCheckpointResumesWaitingTasks(t *testing.T) {
	r := newMigrationRig(t)
	ctx, pool := r.ctx, r.pool
	store := postgres.NewStore(pool, postgres.Options{})
	e := r.engine(t, store)
	claim := func(id string) int64 {
		t.Helper()
		claims, err := store.ClaimTask(ctx, "replica-a", id, time.Minute)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claim %s: %+v %v", id, claims, err)
		}
		return claims[0].Fence
	}
	tasks := runToGates(ctx, t, e, gateTasks(t), claim)

	r.migrateBelow(t, fenceOnCheckpointVersion)
	r.migrateUp(t)
	for _, w := range tasks {
		var onTask, onCheckpoint int64
		if err := pool.QueryRow(ctx, `SELECT t.lease_fence, c.lease_fence FROM tasks t
			JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1`, w.id).Scan(&onTask, &onCheckpoint); err != nil {
			t.Fatal(err)
		}
		if onTask == 0 || onCheckpoint != onTask {
			t.Errorf("task %s: fence %d, its checkpoint's copy %d after migrating up", w.id, onTask, onCheckpoint)
		}
	}
	e = r.engine(t, store)
	for _, w := range tasks {
		decideAndRun(ctx, t, e, w, claim)
	}
}
