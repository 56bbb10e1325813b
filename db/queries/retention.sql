-- HistoryPruneCandidates pages through the tasks that ended in
-- [since, cutoff), in (completed_at, id) order, on tasks_completed_idx: the
-- periodic prune looks only at the tasks that ended since its last run.
-- name: HistoryPruneCandidates :many
SELECT t.id, t.completed_at
FROM tasks t
WHERE t.completed_at IS NOT NULL
  AND t.completed_at >= sqlc.arg(since)::timestamptz
  AND t.completed_at < sqlc.arg(cutoff)::timestamptz
  AND (t.completed_at, t.id) > (sqlc.arg(after_completed_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND t.status IN ('succeeded', 'failed', 'cancelled')
ORDER BY t.completed_at, t.id
LIMIT sqlc.arg(max_tasks)::int;

-- HistoryPruneDelete deletes at most max_rows prunable rows of the given
-- tasks and returns the task of each. Prunable: a plain node checkpoint in
-- the middle of a task that ended (succeeded, failed, cancelled) before the
-- cutoff. Kept: the first and the last checkpoint of every task, every
-- checkpoint of another reason (start, interrupt, decision, and any reason
-- a later engine may add), and every checkpoint that names a pending
-- interrupt (a gate raised after a node run is a node checkpoint: the state
-- the person decided on). It checks again that each task has ended: a
-- failed task retried since it was listed is running and keeps its history.
-- name: HistoryPruneDelete :many
WITH victims AS (
    SELECT h.task_id, h.step
    FROM tasks t
    CROSS JOIN LATERAL (SELECT min(b.step) AS first_step, max(b.step) AS last_step
                        FROM checkpoint_history b WHERE b.task_id = t.id) x
    JOIN checkpoint_history h ON h.task_id = t.id AND h.step > x.first_step AND h.step < x.last_step
    WHERE t.id = ANY(sqlc.arg(task_ids)::uuid[])
      AND t.status IN ('succeeded', 'failed', 'cancelled')
      AND t.completed_at < sqlc.arg(cutoff)::timestamptz
      AND h.reason = 'node'
      AND h.pending_interrupt_id IS NULL
    ORDER BY h.task_id, h.step
    LIMIT sqlc.arg(max_rows)::int
)
DELETE FROM checkpoint_history d
USING victims v
WHERE d.task_id = v.task_id AND d.step = v.step
RETURNING d.task_id;

-- HistoryPruneCount is HistoryPruneDelete without deleting (a dry run):
-- how many rows of how many of the given tasks it would delete.
-- name: HistoryPruneCount :one
SELECT count(*)::bigint AS rows_prunable, count(DISTINCT h.task_id)::bigint AS tasks_prunable
FROM tasks t
CROSS JOIN LATERAL (SELECT min(b.step) AS first_step, max(b.step) AS last_step
                    FROM checkpoint_history b WHERE b.task_id = t.id) x
JOIN checkpoint_history h ON h.task_id = t.id AND h.step > x.first_step AND h.step < x.last_step
WHERE t.id = ANY(sqlc.arg(task_ids)::uuid[])
  AND t.status IN ('succeeded', 'failed', 'cancelled')
  AND t.completed_at < sqlc.arg(cutoff)::timestamptz
  AND h.reason = 'node'
  AND h.pending_interrupt_id IS NULL;

-- HistoryPruneLock makes one pruner at a time per database: replicas that
-- all prune on the hour would otherwise walk the same tasks and queue on
-- the same rows. A session lock, held by the connection the prune runs on.
-- name: HistoryPruneLock :one
SELECT pg_try_advisory_lock(sqlc.arg(lock_key)::bigint) AS locked;

-- name: HistoryPruneUnlock :one
SELECT pg_advisory_unlock(sqlc.arg(lock_key)::bigint) AS unlocked;

-- StateBlobsPrune deletes the blobs of large state fields (00050) of the
-- given ended tasks that no checkpoint of theirs names any more, once
-- HistoryPruneDelete took the rows that named them.
-- name: StateBlobsPrune :execrows
DELETE FROM state_blobs b
USING tasks t
WHERE t.id = ANY(sqlc.arg(task_ids)::uuid[])
  AND t.status IN ('succeeded', 'failed', 'cancelled')
  AND b.task_id = t.id
  AND NOT EXISTS (SELECT 1 FROM workflow_checkpoints c, jsonb_each_text(c.state_refs) r
                  WHERE c.task_id = t.id AND r.value = encode(b.hash, 'hex'))
  AND NOT EXISTS (SELECT 1 FROM checkpoint_history h, jsonb_each_text(h.state_refs) r
                  WHERE h.task_id = t.id AND r.value = encode(b.hash, 'hex'));
