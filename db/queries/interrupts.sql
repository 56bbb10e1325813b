-- name: InterruptInsert :exec
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at, deadline_at, payload_sha256)
VALUES (@id, @task_id, @node, @kind, @iteration, @payload, 'pending', @created_at, sqlc.narg(deadline_at), @payload_sha256);

-- name: InterruptGet :one
SELECT * FROM interrupts WHERE id = @id;

-- name: InterruptListByTask :many
SELECT * FROM interrupts WHERE task_id = @task_id ORDER BY created_at, id;

-- InterruptCountPending counts the pending interrupts by kind (the
-- pending_interrupts gauge of /metrics).
-- InterruptCountPending counts the pending interrupts per kind from
-- row_counts and its deltas (00052_row_counts.sql).
-- name: InterruptCountPending :many
WITH d AS (SELECT key, delta FROM row_count_deltas WHERE scope = 'pending_interrupt_kind')
SELECT key AS kind, sum(n)::int AS pending, (SELECT count(*) FROM d)::int AS deltas
FROM (SELECT key, n FROM row_counts WHERE scope = 'pending_interrupt_kind'
      UNION ALL SELECT key, delta::bigint FROM d) x
GROUP BY key
HAVING sum(n) <> 0
ORDER BY key;
