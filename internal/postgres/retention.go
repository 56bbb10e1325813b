package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Every node run appends a full copy of the task state to
// checkpoint_history, so the table grows with every step of every task
// forever. PruneHistory trims the history of tasks that ended long ago to
// the checkpoints worth keeping: the first, those at interrupts and of
// decisions, the last (HistoryPruneDelete in db/queries/retention.sql).

// Default sizes of a prune: a statement deletes at most DefaultPruneChunkRows
// rows, so no single transaction holds many row locks or writes much WAL,
// and looks at most DefaultPruneBatchTasks tasks.
const (
	DefaultPruneChunkRows  = 10000
	DefaultPruneBatchTasks = 1000
)

// historyPruneLockKey is the advisory lock of a prune ("ghprune!" in ASCII);
// pgtest holds another key.
const historyPruneLockKey int64 = 0x6768_7072_756e_6521

// AuditHistoryPruned is the audit_events kind of a prune that deleted rows.
const AuditHistoryPruned = "history.pruned"

// ErrPruneBusy is returned when another prune holds the database's prune
// lock (another replica, or gatehouse prune in a terminal).
var ErrPruneBusy = errors.New("another prune of the checkpoint history is running")

// HistoryPrune says whose checkpoint history to prune.
type HistoryPrune struct {
	// Before: tasks that ended (succeeded, failed, cancelled) before this
	// instant. Tasks that have not ended are never touched.
	Before time.Time
	// Since, when set, limits the prune to tasks that ended at or after it:
	// a periodic prune need not look again at the tasks its previous run
	// pruned.
	Since time.Time
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// Actor, when set, is recorded in the audit trail (history.pruned) when
	// rows were deleted.
	Actor string
	// ChunkRows and BatchTasks bound one statement (zero: the defaults).
	ChunkRows  int
	BatchTasks int
}

// HistoryPruned is what a prune deleted, or would delete in a dry run.
type HistoryPruned struct {
	Rows  int64 // checkpoint_history rows
	Tasks int64 // tasks that lost at least one row
}

// PruneHistory deletes the intermediate checkpoints of tasks that ended
// before p.Before and keeps, per task, the first checkpoint, every
// checkpoint at an interrupt or of a decision (the fork and audit points),
// and the last one. It works in statements of bounded size, each its own
// transaction, so a large prune holds no lock for long and a cancelled one
// keeps what it did. Returns ErrPruneBusy when another prune is running
// (a dry run takes no lock and never does).
func (s *Store) PruneHistory(ctx context.Context, p HistoryPrune) (HistoryPruned, error) {
	if p.Before.IsZero() {
		return HistoryPruned{}, errors.New("prune history: no cutoff")
	}
	if p.ChunkRows <= 0 {
		p.ChunkRows = DefaultPruneChunkRows
	}
	if p.BatchTasks <= 0 {
		p.BatchTasks = DefaultPruneBatchTasks
	}
	if p.DryRun {
		return s.pruneHistory(ctx, s.q, p)
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return HistoryPruned{}, fmt.Errorf("prune history: %w", err)
	}
	q := dbsqlc.New(conn)
	locked, err := q.HistoryPruneLock(ctx, historyPruneLockKey)
	if err != nil {
		conn.Release()
		return HistoryPruned{}, fmt.Errorf("prune history: %w", err)
	}
	if !locked {
		conn.Release()
		return HistoryPruned{}, ErrPruneBusy
	}
	out, err := s.pruneHistory(ctx, q, p)

	// The unlock and the audit record happen even when ctx was cancelled
	// (shutdown, Ctrl-C), within a bound of their own.
	after, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, uerr := q.HistoryPruneUnlock(after, historyPruneLockKey); uerr != nil {
		// A connection that may still hold the lock must not go back to
		// the pool: the lock would outlive the prune.
		_ = conn.Hijack().Close(after)
	} else {
		conn.Release()
	}
	if out.Rows > 0 && p.Actor != "" {
		data, _ := json.Marshal(map[string]any{"rows": out.Rows, "tasks": out.Tasks,
			"ended_before": p.Before.UTC().Format(time.RFC3339Nano), "complete": err == nil})
		if aerr := s.AddAudit(after, auth.AuditEvent{Actor: p.Actor, Kind: AuditHistoryPruned,
			Subject: "checkpoint_history", Data: data}); aerr != nil && err == nil {
			err = aerr
		}
	}
	return out, err
}

// pruneHistory walks the ended tasks batch by batch and prunes (or counts)
// each batch chunk by chunk. On an error it returns what it did so far.
func (s *Store) pruneHistory(ctx context.Context, q *dbsqlc.Queries, p HistoryPrune) (HistoryPruned, error) {
	var out HistoryPruned
	// The keyset starts at Since too, so that the first page's index scan
	// starts there rather than at the oldest ended task.
	after := dbsqlc.HistoryPruneCandidatesParams{Since: p.Since, Cutoff: p.Before, AfterCompletedAt: p.Since,
		MaxTasks: int32(p.BatchTasks)}
	for {
		batch, err := q.HistoryPruneCandidates(ctx, after)
		if err != nil {
			return out, fmt.Errorf("prune history: list ended tasks: %w", err)
		}
		if len(batch) == 0 {
			return out, nil
		}
		ids := make([]uuid.UUID, len(batch))
		for i, t := range batch {
			ids[i] = t.ID
		}
		if p.DryRun {
			n, err := q.HistoryPruneCount(ctx, dbsqlc.HistoryPruneCountParams{TaskIds: ids, Cutoff: p.Before})
			if err != nil {
				return out, fmt.Errorf("prune history: count: %w", err)
			}
			out.Rows += n.RowsPrunable
			out.Tasks += n.TasksPrunable
		} else {
			// A task belongs to one batch only, so counting its tasks here
			// counts each task once.
			touched := map[uuid.UUID]bool{}
			for {
				gone, err := q.HistoryPruneDelete(ctx, dbsqlc.HistoryPruneDeleteParams{TaskIds: ids, Cutoff: p.Before,
					MaxRows: int32(p.ChunkRows)})
				for _, id := range gone {
					touched[id] = true
				}
				out.Rows += int64(len(gone))
				if err != nil {
					out.Tasks += int64(len(touched))
					return out, fmt.Errorf("prune history: delete: %w", err)
				}
				if len(gone) < p.ChunkRows {
					break
				}
			}
			out.Tasks += int64(len(touched))
			if len(touched) > 0 {
				// The large fields only the deleted rows named go too.
				tasks := make([]uuid.UUID, 0, len(touched))
				for id := range touched {
					tasks = append(tasks, id)
				}
				if _, err := q.StateBlobsPrune(ctx, tasks); err != nil {
					return out, fmt.Errorf("prune history: delete state blobs: %w", err)
				}
			}
		}
		if len(batch) < p.BatchTasks {
			return out, nil
		}
		last := batch[len(batch)-1]
		after.AfterCompletedAt, after.AfterID = deref(last.CompletedAt), last.ID
	}
}
