-- name: InterruptInsert :exec
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
VALUES (@id, @task_id, @node, @kind, @iteration, @payload, 'pending', @created_at);

-- name: InterruptGet :one
SELECT * FROM interrupts WHERE id = @id;

-- name: InterruptListByTask :many
SELECT * FROM interrupts WHERE task_id = @task_id ORDER BY created_at, id;

-- InterruptCountPending counts the pending interrupts by kind (the
-- pending_interrupts gauge of /metrics).
-- name: InterruptCountPending :many
SELECT kind, count(*)::int AS pending
FROM interrupts
WHERE status = 'pending'
GROUP BY kind
ORDER BY kind;
