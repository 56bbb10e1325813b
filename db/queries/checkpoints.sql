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
