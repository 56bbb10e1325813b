-- name: DecisionInsert :one
INSERT INTO decisions (interrupt_id, task_id, action, feedback, value, decided_by, decided_at)
VALUES (@interrupt_id, @task_id, @action, @feedback, sqlc.narg(value), @decided_by, @decided_at)
RETURNING id;

-- name: DecisionGetByInterrupt :one
SELECT * FROM decisions WHERE interrupt_id = @interrupt_id;

-- name: DecisionListByTask :many
SELECT * FROM decisions WHERE task_id = @task_id ORDER BY decided_at, id;
