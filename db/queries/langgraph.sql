-- The LangGraph API's threads and runs (SPEC §14). A thread's status comes
-- from its task's: none or succeeded/cancelled idle, queued/running busy,
-- waiting interrupted, failed error.

-- name: LGThreadInsert :one
INSERT INTO lg_threads (id, metadata, created_by)
VALUES (@id, @metadata, @created_by)
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: LGThreadMergeMetadata :exec
UPDATE lg_threads SET metadata = metadata || @patch::jsonb, updated_at = now() WHERE id = @id;

-- name: LGThreadGet :one
SELECT th.id, th.metadata, th.created_at, GREATEST(th.updated_at, t.updated_at)::timestamptz AS updated_at,
       t.status AS task_status, t.workflow AS task_workflow, c.event_seq AS task_event_seq, true AS stored
FROM lg_threads th LEFT JOIN tasks t ON t.id = th.id LEFT JOIN workflow_checkpoints c ON c.task_id = t.id
WHERE th.id = @id
UNION ALL
SELECT t.id, jsonb_build_object('graph_id', t.workflow, 'assistant_id', @assistants::jsonb ->> t.workflow),
       t.created_at, t.updated_at, t.status, t.workflow, c.event_seq, false
FROM tasks t LEFT JOIN workflow_checkpoints c ON c.task_id = t.id
WHERE t.id = @id AND NOT EXISTS (SELECT 1 FROM lg_threads x WHERE x.id = t.id);

-- LGThreadSearch filters and pages threads; total is the number matching
-- before limit and offset.
-- name: LGThreadSearch :many
WITH th AS (
    SELECT th.id, th.metadata, th.created_at, GREATEST(th.updated_at, t.updated_at)::timestamptz AS updated_at,
           t.status AS task_status, t.workflow AS task_workflow
    FROM lg_threads th LEFT JOIN tasks t ON t.id = th.id
    UNION ALL
    SELECT t.id, jsonb_build_object('graph_id', t.workflow, 'assistant_id', @assistants::jsonb ->> t.workflow),
           t.created_at, t.updated_at, t.status, t.workflow
    FROM tasks t
    WHERE NOT EXISTS (SELECT 1 FROM lg_threads x WHERE x.id = t.id)
), s AS (
    SELECT th.*, CASE
            WHEN th.task_status IN ('queued', 'running') THEN 'busy'
            WHEN th.task_status = 'waiting' THEN 'interrupted'
            WHEN th.task_status = 'failed' THEN 'error'
            ELSE 'idle' END::text AS status
    FROM th
)
SELECT s.id, s.metadata, s.created_at, s.updated_at, s.task_status, s.task_workflow, count(*) OVER ()::bigint AS total
FROM s
WHERE (@status::text = '' OR s.status = @status::text)
  AND s.metadata @> @metadata::jsonb
  AND (cardinality(@ids::uuid[]) = 0 OR s.id = ANY (@ids::uuid[]))
ORDER BY
    CASE WHEN @sort_by::text = 'created_at' AND @descending::bool THEN s.created_at END DESC,
    CASE WHEN @sort_by::text = 'created_at' AND NOT @descending::bool THEN s.created_at END ASC,
    CASE WHEN @sort_by::text = 'updated_at' AND @descending::bool THEN s.updated_at END DESC,
    CASE WHEN @sort_by::text = 'updated_at' AND NOT @descending::bool THEN s.updated_at END ASC,
    CASE WHEN @sort_by::text = 'status' AND @descending::bool THEN s.status END DESC,
    CASE WHEN @sort_by::text = 'status' AND NOT @descending::bool THEN s.status END ASC,
    CASE WHEN @descending::bool THEN s.id END DESC,
    s.id ASC
LIMIT @max_rows::int OFFSET @skip::int;

-- LGRunInsert starts a run after the task's last event (0: no task yet)
-- at its current checkpoint step, giving a task started elsewhere its
-- thread row first (adopt). A second active run of the thread violates
-- lg_runs_one_active_idx.
-- name: LGRunInsert :one
WITH adopt AS (
    INSERT INTO lg_threads (id, metadata, created_by, created_at)
    SELECT t.id, @adopt_metadata::jsonb, t.created_by, t.created_at FROM tasks t WHERE t.id = @thread_id AND @adopt::bool
    ON CONFLICT (id) DO NOTHING
)
INSERT INTO lg_runs (id, thread_id, assistant_id, after_seq, start_step, metadata, kwargs, multitask_strategy, created_by)
SELECT @id, @thread_id, @assistant_id, COALESCE((SELECT c.event_seq FROM workflow_checkpoints c WHERE c.task_id = @thread_id), 0),
       COALESCE((SELECT c.step FROM workflow_checkpoints c WHERE c.task_id = @thread_id), 0),
       @metadata, @kwargs, @multitask_strategy, @created_by
RETURNING *;

-- name: LGRunDelete :exec
DELETE FROM lg_runs WHERE id = @id;

-- LGRunsSettle ends the thread's active runs whose end is in the task's
-- events: the first event after the run's start that made the task wait
-- (success), end (success, or interrupted when cancelled) or fail (error).
-- name: LGRunsSettle :exec
WITH ends AS (
    SELECT r.id, e.seq, e.type, e.created_at
    FROM lg_runs r
    CROSS JOIN LATERAL (
        SELECT te.seq, te.type, te.created_at FROM task_events te
        WHERE te.task_id = r.thread_id AND te.seq > r.after_seq
          AND te.type IN ('task.waiting', 'task.completed', 'task.failed', 'task.cancelled')
        ORDER BY te.seq LIMIT 1) e
    WHERE r.thread_id = @thread_id AND r.status IN ('pending', 'running')
)
UPDATE lg_runs r
SET status = CASE ends.type WHEN 'task.failed' THEN 'error' WHEN 'task.cancelled' THEN 'interrupted' ELSE 'success' END,
    end_seq = ends.seq, updated_at = ends.created_at
FROM ends
WHERE r.id = ends.id;

-- LGRunSettle ends one run as status at end_seq (a run that decided
-- nothing new: its interrupt still waits for other approvers).
-- name: LGRunSettle :exec
UPDATE lg_runs SET status = @status, end_seq = @end_seq, updated_at = now()
WHERE id = @id AND status IN ('pending', 'running');

-- name: LGRunGet :one
SELECT r.*, t.status AS task_status
FROM lg_runs r LEFT JOIN tasks t ON t.id = r.thread_id
WHERE r.thread_id = @thread_id AND r.id = @id;

-- name: LGRunList :many
SELECT r.*, t.status AS task_status
FROM lg_runs r LEFT JOIN tasks t ON t.id = r.thread_id
WHERE r.thread_id = @thread_id
  AND (@status::text = '' OR (CASE WHEN r.status = 'pending' AND t.status = 'running' THEN 'running' ELSE r.status END) = @status::text)
ORDER BY r.created_at DESC, r.id DESC
LIMIT @max_rows::int OFFSET @skip::int;

-- name: LGTaskEventSeq :one
SELECT event_seq FROM workflow_checkpoints WHERE task_id = @id;

-- LGLastRejection is the feedback of the last rejection at node before
-- the interrupt named (the reviewer sees why this version was made).
-- name: LGLastRejection :one
SELECT d.feedback
FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id
WHERE d.task_id = @task_id AND i.node = @node AND d.action = 'reject' AND d.interrupt_id <> @interrupt_id::uuid
ORDER BY d.decided_at DESC
LIMIT 1;

-- LGNodeCheckpointNth is the n-th (from 0) checkpoint a node run wrote
-- after step, with its blobs: the state after the run's n-th node.
-- name: LGNodeCheckpointNth :one
SELECT c.step, c.state, c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values
FROM checkpoint_history c
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys, array_agg(b.value ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')) sb ON true
WHERE c.task_id = @task_id AND c.step > @after::int AND c.reason = 'node'
ORDER BY c.step
OFFSET @n::int
LIMIT 1;

-- LGInterruptWithFeedback is an interrupt with the feedback of the last
-- rejection at its node before it.
-- name: LGInterruptWithFeedback :one
SELECT i.id, i.task_id, i.node, i.kind, i.iteration, i.payload, i.status, i.created_at, i.resolved_at, COALESCE((
    SELECT d.feedback FROM decisions d JOIN interrupts j ON j.id = d.interrupt_id
    WHERE d.task_id = i.task_id AND j.node = i.node AND d.action = 'reject' AND d.interrupt_id <> i.id
    ORDER BY d.decided_at DESC LIMIT 1), '')::text AS feedback
FROM interrupts i
WHERE i.id = @id;

-- LGRunInsertResume is LGRunInsert for a resume, sent in the same round
-- trip as the read of the task it resumes (TaskWithPending): the run is
-- written only when the task waits and runs the run's graph, which a
-- resume needs anyway (the caller deletes it when it refuses the resume
-- for another reason). No row: not written. A second active run of the
-- thread violates lg_runs_one_active_idx.
-- name: LGRunInsertResume :one
WITH t AS (
    SELECT tasks.id, tasks.created_by, tasks.created_at, c.event_seq
    FROM tasks JOIN workflow_checkpoints c ON c.task_id = tasks.id
    WHERE tasks.id = sqlc.arg(thread_id)::uuid AND tasks.status = 'waiting' AND tasks.workflow = @workflow::text
), adopt AS (
    INSERT INTO lg_threads (id, metadata, created_by, created_at)
    SELECT t.id, @adopt_metadata::jsonb, t.created_by, t.created_at FROM t
    ON CONFLICT (id) DO NOTHING
)
INSERT INTO lg_runs (id, thread_id, assistant_id, after_seq, start_step, metadata, kwargs, multitask_strategy, created_by)
SELECT sqlc.arg(id)::uuid, t.id, sqlc.arg(assistant_id)::uuid, t.event_seq,
       COALESCE((SELECT c.step FROM workflow_checkpoints c WHERE c.task_id = t.id), 0),
       sqlc.arg(metadata)::jsonb, sqlc.arg(kwargs)::jsonb, sqlc.arg(multitask_strategy)::text, sqlc.arg(created_by)::text
FROM t
RETURNING *;
