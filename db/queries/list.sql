-- TaskList pages through every task by keyset on (created_at, id), newest
-- first. Each filter has its own query (TaskListByStatus,
-- TaskListByWorkflow) so that the plan, generic or not, walks the index made
-- for it (tasks_created_idx, tasks_status_created_idx,
-- tasks_workflow_created_idx) rather than filtering a scan of another. A
-- missing cursor reads from the top ('infinity', the largest uuid).
-- name: TaskList :many
SELECT * FROM tasks
WHERE (created_at, id) < (COALESCE(sqlc.narg(before_at)::timestamptz, 'infinity'::timestamptz),
                          COALESCE(sqlc.narg(before_id)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows)::int;

-- TaskListByStatusOnly is TaskListByStatus without a workflow. The keyset
-- walk runs on tasks_status_created_idx alone (index-only: status,
-- created_at and id are all in it), and only the page's rows are read from
-- the heap. Written as one scan with the status as a filter, the planner
-- preferred tasks_created_idx whenever the status is common, and walked
-- past every newer task of another status: ~100 ms per status for the
-- dashboard at 1,000,000 tasks, whose newest 100,000 were waiting.
-- name: TaskListByStatusOnly :many
SELECT * FROM tasks
WHERE id = ANY (ARRAY(
    SELECT k.id FROM tasks k
    WHERE k.status = sqlc.arg(status)::text
      AND (k.created_at, k.id) < (COALESCE(sqlc.narg(before_at)::timestamptz, 'infinity'::timestamptz),
                                  COALESCE(sqlc.narg(before_id)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
    ORDER BY k.created_at DESC, k.id DESC
    LIMIT sqlc.arg(max_rows)::int))
ORDER BY created_at DESC, id DESC;

-- TaskListByStatus also filters by workflow when one is given.
-- name: TaskListByStatus :many
SELECT * FROM tasks
WHERE status = sqlc.arg(status)::text
  AND (sqlc.narg(workflow)::text IS NULL OR workflow = sqlc.narg(workflow)::text)
  AND (created_at, id) < (COALESCE(sqlc.narg(before_at)::timestamptz, 'infinity'::timestamptz),
                          COALESCE(sqlc.narg(before_id)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: TaskListByWorkflow :many
SELECT * FROM tasks
WHERE workflow = sqlc.arg(workflow)::text
  AND (created_at, id) < (COALESCE(sqlc.narg(before_at)::timestamptz, 'infinity'::timestamptz),
                          COALESCE(sqlc.narg(before_id)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows)::int;

-- InterruptPendingByTasks returns the pending interrupt of each of the
-- tasks that has one (at most one each: interrupts_one_pending_idx).
-- name: InterruptPendingByTasks :many
SELECT * FROM interrupts
WHERE task_id = ANY(sqlc.arg(task_ids)::uuid[]) AND status = 'pending';

-- InterruptList is the inbox: interrupts of one status, optionally of one
-- kind, oldest first, with their task's title and workflow.
-- name: InterruptList :many
SELECT sqlc.embed(i), t.title AS task_title, t.workflow AS task_workflow
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = sqlc.arg(status)::text
  AND (sqlc.narg(kind)::text IS NULL OR i.kind = sqlc.narg(kind)::text)
ORDER BY i.created_at, i.id
LIMIT sqlc.arg(max_rows)::int;

-- name: CheckpointCurrent :one
SELECT c.task_id, c.step, c.last_node_id, c.next_node_id, c.state, c.updated_at,
       c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values
FROM workflow_checkpoints c
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys, array_agg(b.value ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')) sb ON true
WHERE c.task_id = sqlc.arg(task_id)::uuid;
