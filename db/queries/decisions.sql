-- name: DecisionListByTask :many
SELECT * FROM decisions WHERE task_id = @task_id ORDER BY decided_at, id;

-- DecisionRecord is a decision in one statement: it resolves the pending
-- interrupt, inserts the decision, makes the task runnable and appends its
-- decision.recorded event. No row: the interrupt was not pending (or not
-- the task's); nothing was written.
-- name: DecisionRecord :one
WITH i AS (
    UPDATE interrupts SET status = 'resolved', resolved_at = now()
    WHERE id = @interrupt_id::uuid AND task_id = @task_id::uuid AND status = 'pending'
    RETURNING id, resolved_at
), d AS (
    INSERT INTO decisions (interrupt_id, task_id, action, feedback, value, decided_by, decided_at)
    SELECT i.id, @task_id::uuid, @action::text, @feedback::text, sqlc.narg(value)::jsonb, @decided_by::text, i.resolved_at
    FROM i
    RETURNING id, decided_at
), t AS (
    UPDATE tasks SET status = 'queued', event_seq = event_seq + 1, updated_at = now()
    WHERE id = @task_id::uuid AND EXISTS (SELECT 1 FROM d)
    RETURNING event_seq
), e AS (
    INSERT INTO task_events (task_id, seq, type, node, iteration, phase, data, created_at)
    SELECT @task_id::uuid, t.event_seq, @type::text, @node::text, @iteration::int, @phase::text, @data::jsonb,
           @created_at::timestamptz
    FROM t
    RETURNING seq
)
SELECT d.id, d.decided_at, e.seq FROM d, e;
