-- name: TaskInsert :exec
INSERT INTO tasks (id, workflow, title, input, options, status, current_node, created_by, created_at, updated_at)
VALUES (@id, @workflow, @title, @input, @options, @status, @current_node, @created_by, @created_at, @created_at);

-- name: TaskGet :one
SELECT * FROM tasks WHERE id = @id;

-- TaskCommitEvents is the heart of a commit: it checks the writer's fence
-- (gatehouse_lock_task raises GH409 when the lease is lost, aborting the
-- transaction), moves the task, and appends the events with gap-free seqs
-- taken from tasks.event_seq — in one statement.
-- name: TaskCommitEvents :many
WITH lock AS (
    SELECT gatehouse_lock_task(@id::uuid, @fence::bigint) AS fence
), t AS (
    UPDATE tasks
    SET status       = @status,
        current_node = @current_node,
        result       = COALESCE(sqlc.narg(result)::jsonb, tasks.result),
        error        = @error,
        event_seq    = tasks.event_seq + cardinality(@types::text[]),
        updated_at   = now(),
        completed_at = CASE WHEN @status::text IN ('succeeded', 'failed', 'cancelled') THEN now() END
    FROM lock
    WHERE tasks.id = @id::uuid
    RETURNING tasks.event_seq
)
INSERT INTO task_events (task_id, seq, type, node, iteration, phase, duration_ms, data, created_at)
SELECT @id::uuid, t.event_seq - cardinality(@types::text[]) + e.ord, e.type, (@nodes::text[])[e.ord],
       (@iterations::int[])[e.ord], (@phases::text[])[e.ord], NULLIF((@durations::bigint[])[e.ord], -1),
       ((@datas::text[])[e.ord])::jsonb, (@ats::timestamptz[])[e.ord]
FROM t, unnest(@types::text[]) WITH ORDINALITY AS e(type, ord)
RETURNING seq;

-- TaskDecided makes a waiting task runnable and appends its
-- decision.recorded event, inside the decision's transaction.
-- name: TaskDecided :one
WITH t AS (
    UPDATE tasks SET status = 'queued', event_seq = event_seq + 1, updated_at = now()
    WHERE id = @id::uuid
    RETURNING event_seq
)
INSERT INTO task_events (task_id, seq, type, node, iteration, phase, data, created_at)
SELECT @id::uuid, t.event_seq, @type, @node, @iteration, @phase, @data, @created_at
FROM t
RETURNING seq;
