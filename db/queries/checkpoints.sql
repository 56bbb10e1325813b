-- CheckpointSave upserts the current checkpoint and appends it to the
-- history in one statement, so the state crosses the wire once.
-- name: CheckpointSave :exec
WITH cp AS (
    INSERT INTO workflow_checkpoints (task_id, state, last_node_id, updated_at, step, next_node_id, iterations,
                                      answers, pending_interrupt_id)
    VALUES (@task_id, @state, @last_node_id, @updated_at, @step, @next_node_id, @iterations, @answers,
            sqlc.narg(pending_interrupt_id))
    ON CONFLICT (task_id) DO UPDATE
        SET state                = EXCLUDED.state,
            last_node_id         = EXCLUDED.last_node_id,
            updated_at           = EXCLUDED.updated_at,
            step                 = EXCLUDED.step,
            next_node_id         = EXCLUDED.next_node_id,
            iterations           = EXCLUDED.iterations,
            answers              = EXCLUDED.answers,
            pending_interrupt_id = EXCLUDED.pending_interrupt_id
    RETURNING task_id, step, last_node_id, next_node_id, state, iterations, answers, pending_interrupt_id, updated_at
)
INSERT INTO checkpoint_history (task_id, step, reason, last_node_id, next_node_id, state, iterations, answers,
                                pending_interrupt_id, created_at)
SELECT task_id, step, @reason, last_node_id, next_node_id, state, iterations, answers, pending_interrupt_id, updated_at
FROM cp;

-- name: TaskSnapshot :one
SELECT t.id, t.workflow, t.title, t.input, t.options, t.status, t.current_node, t.result, t.error,
       t.created_by, t.created_at, t.updated_at, t.completed_at, t.lease_fence,
       c.state, c.last_node_id, c.step, c.next_node_id, c.iterations, c.answers, c.pending_interrupt_id,
       c.updated_at AS checkpoint_updated_at
FROM tasks t
JOIN workflow_checkpoints c ON c.task_id = t.id
WHERE t.id = @id;

-- name: CheckpointHistoryList :many
SELECT task_id, step, reason, last_node_id, next_node_id, created_at
FROM checkpoint_history
WHERE task_id = @task_id
ORDER BY step;

-- name: CheckpointHistoryGet :one
SELECT * FROM checkpoint_history WHERE task_id = @task_id AND step = @step;
