package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// asyncBatch is a batch, one implicit transaction, that commits without
// waiting for its WAL flush (each caller says why that is safe); with
// generic, its statements use their generic plans (TxGenericPlans).
func asyncBatch(ctx context.Context, generic bool) *pgx.Batch {
	b := &pgx.Batch{}
	if generic {
		queue(b, func(q *dbsqlc.Queries) error { return q.TxGenericPlans(ctx) })
	}
	queue(b, func(q *dbsqlc.Queries) error { return q.TxAsyncCommit(ctx) })
	return b
}

// Claim leases up to max runnable tasks to owner for ttl: queued tasks and
// running tasks whose lease expired. Concurrent claimers never get the same
// task (FOR NO KEY UPDATE SKIP LOCKED).
//
// The claim commits without waiting for its WAL flush: a claim lost in a
// database crash leaves the task runnable (its old fence), and the worker
// that believed it held the lease can write nothing under the fence it
// was given. Any later synchronous commit flushes the claim with it, as
// WAL is flushed in order. This takes the claim's fsync (most of its
// latency on a busy disk) off the path of every task start.
//
// Each claim carries its task's snapshot, read by the claim's statement, so
// that its run needs no TaskSnapshot round trip. A snapshot that cannot be
// made is left out (nil): the run loads the task and meets the same error,
// which fails the task as for any run.
func (s *Store) Claim(ctx context.Context, owner string, max int, ttl time.Duration) ([]graph.Claim, error) {
	var rows []dbsqlc.TaskClaimRow
	p := dbsqlc.TaskClaimParams{Owner: owner, TtlSeconds: ttl.Seconds(), MaxTasks: int32(max)}
	// asyncBatch's TxAsyncCommit, and an index scan for the claim.
	b := &pgx.Batch{}
	queue(b, func(q *dbsqlc.Queries) error { return q.TxClaimPlans(ctx) })
	queue(b, func(q *dbsqlc.Queries) error {
		_, err := q.TaskClaim(ctx, p)
		return err
	}).Query(func(r pgx.Rows) error {
		// sqlc's own scan of its 40 columns: pgx.RowToStructByPos did it
		// by reflection, about a fifth of a claim's CPU.
		var err error
		rows, err = fromRows(r).TaskClaim(ctx, p)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	out := make([]graph.Claim, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		id := r.ID.String()
		c := graph.Claim{TaskID: id, Fence: r.LeaseFence, Seq: r.EventSeq}
		if snap, err := s.snapshot(id, nil, snapshotRow(r), true); err == nil {
			c.Snapshot = snap
		}
		out = append(out, c)
	}
	return out, nil
}

// snapshotRow is a TaskClaim row's TaskSnapshot columns (all but the last,
// event_seq): TestClaimRowIsSnapshotRow checks that the two queries keep
// the same columns, and that this copies each.
func snapshotRow(r *dbsqlc.TaskClaimRow) dbsqlc.TaskSnapshotRow {
	return dbsqlc.TaskSnapshotRow{
		ID:                  r.ID,
		Workflow:            r.Workflow,
		Title:               r.Title,
		Input:               r.Input,
		Options:             r.Options,
		Status:              r.Status,
		CurrentNode:         r.CurrentNode,
		Result:              r.Result,
		Error:               r.Error,
		CreatedBy:           r.CreatedBy,
		CreatedAt:           r.CreatedAt,
		UpdatedAt:           r.UpdatedAt,
		CompletedAt:         r.CompletedAt,
		LeaseFence:          r.LeaseFence,
		State:               r.State,
		LastNodeID:          r.LastNodeID,
		Step:                r.Step,
		NextNodeID:          r.NextNodeID,
		Iterations:          r.Iterations,
		Answers:             r.Answers,
		PendingInterruptID:  r.PendingInterruptID,
		CheckpointUpdatedAt: r.CheckpointUpdatedAt,
		StateRefs:           r.StateRefs,
		BlobKeys:            r.BlobKeys,
		BlobValues:          r.BlobValues,
		ITaskID:             r.ITaskID,
		INode:               r.INode,
		IKind:               r.IKind,
		IIteration:          r.IIteration,
		IPayload:            r.IPayload,
		IStatus:             r.IStatus,
		ICreatedAt:          r.ICreatedAt,
		IResolvedAt:         r.IResolvedAt,
		DID:                 r.DID,
		DAction:             r.DAction,
		DFeedback:           r.DFeedback,
		DValue:              r.DValue,
		DDecidedBy:          r.DDecidedBy,
		DDecidedAt:          r.DDecidedAt,
	}
}

// ClaimTask is Claim for one task: it leases taskID to owner when the task
// is runnable (none when it is not, or another worker holds it).
func (s *Store) ClaimTask(ctx context.Context, owner, taskID string, ttl time.Duration) ([]graph.Claim, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.TaskClaimOne(ctx, dbsqlc.TaskClaimOneParams{Owner: owner, TtlSeconds: ttl.Seconds(), ID: id})
	if err != nil {
		return nil, fmt.Errorf("claim task %s: %w", taskID, err)
	}
	out := make([]graph.Claim, 0, len(rows))
	for _, r := range rows {
		out = append(out, graph.Claim{TaskID: r.ID.String(), Fence: r.LeaseFence, Seq: r.EventSeq})
	}
	return out, nil
}

// Heartbeat extends a lease. Errors: graph.ErrLeaseLost when the fence
// moved on or the task left the running status.
func (s *Store) Heartbeat(ctx context.Context, c graph.Claim, ttl time.Duration) error {
	id, ok := parseID(c.TaskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	n, err := s.q.TaskHeartbeat(ctx, dbsqlc.TaskHeartbeatParams{ID: id, Fence: c.Fence, TtlSeconds: ttl.Seconds()})
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", c.TaskID, err)
	}
	if n == 0 {
		return graph.ErrLeaseLost
	}
	return nil
}

// Release hands a lease back before it expires, so another worker (of any
// replica) takes the task over at once, and wakes the workers.
func (s *Store) Release(ctx context.Context, c graph.Claim) error {
	id, ok := parseID(c.TaskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	if _, err := s.q.TaskRelease(ctx, dbsqlc.TaskReleaseParams{ID: id, Fence: c.Fence}); err != nil {
		return fmt.Errorf("release %s: %w", c.TaskID, err)
	}
	s.announce(ctx, note{task: c.TaskID})
	return nil
}

// NextExpiry is when the earliest lease of a running task expires (an hour
// from now when none runs): the sweep sleeps until then.
func (s *Store) NextExpiry(ctx context.Context) (time.Time, error) {
	t, err := s.q.TaskNextExpiry(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("next lease expiry: %w", err)
	}
	return t, nil
}

// Cancel ends a task that has not ended: pending interrupts become
// cancelled, task.cancelled is appended, and the fence moves on so a worker
// running it writes nothing more. Errors: graph.ErrTaskNotFound,
// *graph.TaskStatusError.
func (s *Store) Cancel(ctx context.Context, taskID, actor string) error {
	return s.cancel(ctx, taskID, map[string]string{"cancelled_by": actor, "actor": actor})
}

// cancel is Cancel with the task.cancelled event's data.
func (s *Store) cancel(ctx context.Context, taskID string, what map[string]string) error {
	id, ok := parseID(taskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	data, _ := json.Marshal(what)
	var notices []notify.Delivery
	err := s.transition(ctx, taskID, "cancel", func(q *dbsqlc.Queries) (int64, error) {
		seq, err := q.TaskCancel(ctx, dbsqlc.TaskCancelParams{ID: id, Data: data})
		if err != nil {
			return 0, err
		}
		if err := q.InterruptsCancelPending(ctx, id); err != nil {
			return 0, err
		}
		notices, err = s.enqueueTx(ctx, q, id, &outboxEvent{event: notify.EventCancelled, mode: "creator"})
		return seq, err
	}, false)
	if err == nil {
		s.outboxWritten(ctx, notices)
	}
	return err
}

// Retry makes a failed task runnable again; it resumes from its last
// checkpoint. Errors: graph.ErrTaskNotFound, *graph.TaskStatusError.
func (s *Store) Retry(ctx context.Context, taskID, actor string) error {
	id, ok := parseID(taskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	data, _ := json.Marshal(map[string]string{"retried_by": actor, "actor": actor})
	return s.transition(ctx, taskID, "retry", func(q *dbsqlc.Queries) (int64, error) {
		return q.TaskRetry(ctx, dbsqlc.TaskRetryParams{ID: id, Data: data})
	}, true)
}

// transition runs a one-event status change in a transaction and announces
// it; no row matching means the task is missing or in the wrong status.
func (s *Store) transition(ctx context.Context, taskID, action string, change func(q *dbsqlc.Queries) (int64, error), runnable bool) error {
	id, _ := parseID(taskID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", action, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	q := s.q.WithTx(tx)
	seq, err := change(q)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %s: %w", action, taskID, err)
		}
		t, gerr := q.TaskGet(ctx, id)
		if errors.Is(gerr, pgx.ErrNoRows) {
			return graph.ErrTaskNotFound
		}
		if gerr != nil {
			return fmt.Errorf("%s %s: %w", action, taskID, gerr)
		}
		return &graph.TaskStatusError{TaskID: taskID, Status: graph.TaskStatus(t.Status), Action: action}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit: %w", action, err)
	}
	notes := []note{{task: taskID, first: seq, last: seq}}
	if runnable {
		notes = append(notes, note{task: taskID, at: seq})
	}
	s.announce(ctx, notes...)
	s.publish(ctx, taskID, seq)
	return nil
}

// TouchTask implements graph.Toucher: the row of a running task whose
// commits leave it alone (graph.Commit.Quiet) shows node, the one running
// for a while now, if fence is still the task's. Without waiting for its
// flush: it only says where the task is.
func (s *Store) TouchTask(ctx context.Context, taskID string, fence int64, node string) error {
	id, ok := parseID(taskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	b := asyncBatch(ctx, false)
	p := dbsqlc.TaskTouchParams{ID: id, Fence: fence, Node: node}
	queue(b, func(q *dbsqlc.Queries) error { return q.TaskTouch(ctx, p) })
	return s.pool.SendBatch(ctx, b).Close()
}
