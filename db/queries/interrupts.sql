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

-- InterruptDecideByRule records the decision a rule of the policy took on
-- an interrupt as it was raised (SPEC §18), in the raise's transaction:
-- the interrupt becomes resolved (its callback, when a request's, is
-- written by the trigger) and the decision row names policy:<rule>.
-- name: InterruptDecideByRule :exec
WITH i AS (
    UPDATE interrupts SET status = 'resolved', resolved_at = @decided_at::timestamptz
    WHERE id = @id::uuid AND status = 'pending'
    RETURNING id, task_id, payload_sha256
)
INSERT INTO decisions (interrupt_id, task_id, action, feedback, value, decided_by, decided_at, payload_sha256)
SELECT i.id, i.task_id, @action::text, @feedback::text, NULL, @decided_by::text, @decided_at::timestamptz, i.payload_sha256 FROM i;
