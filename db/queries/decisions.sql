-- name: DecisionListByTask :many
SELECT * FROM decisions WHERE task_id = @task_id ORDER BY decided_at, id;

-- DecisionRecord is a decision in one statement: it resolves the pending
-- interrupt, inserts the decision, makes the task runnable and appends its
-- decision.recorded event. No row: the interrupt was not pending (or not
-- the task's); nothing was written. With a lease_owner, a waiting task is
-- leased to it at once (running, the fence moved on as by a claim)
-- instead of queued: the replica that took the decision runs the task
-- without a claim of its own, and the row carries what its run needs of
-- the interrupt and the decision (i_*, d_value; the payload only then):
-- the run's snapshot (TaskRunState) need not read them again.
-- name: DecisionRecord :one
WITH i AS (
    UPDATE interrupts SET status = 'resolved', resolved_at = now(), claimed_by = NULL, claim_expires_at = NULL
    WHERE id = @interrupt_id::uuid AND task_id = @task_id::uuid AND status = 'pending'
      -- a claim of someone else's bars the decision (SPEC §11)
      AND (claimed_by IS NULL OR claim_expires_at <= now() OR claimed_by = @decided_by::text)
      -- the decider saw what is decided on, when they say what they saw
      AND (@payload_sha256::text = '' OR payload_sha256 = '' OR payload_sha256 = @payload_sha256::text)
    RETURNING id, resolved_at, payload_sha256, node, kind, iteration, created_at,
              (CASE WHEN sqlc.arg(lease_owner)::text <> '' THEN payload END)::jsonb AS payload
), d AS (
    INSERT INTO decisions (interrupt_id, task_id, action, feedback, value, decided_by, decided_at, payload_sha256)
    SELECT i.id, @task_id::uuid, @action::text, @feedback::text, sqlc.narg(value)::jsonb, @decided_by::text, i.resolved_at,
           i.payload_sha256
    FROM i
    RETURNING id, decided_at, value
), t AS (
    -- In SET, tasks.status is the status before this update.
    UPDATE tasks
    SET status           = CASE WHEN sqlc.arg(lease_owner)::text <> '' AND tasks.status = 'waiting'
                                THEN 'running' ELSE 'queued' END,
        lease_owner      = CASE WHEN sqlc.arg(lease_owner)::text <> '' AND tasks.status = 'waiting'
                                THEN sqlc.arg(lease_owner)::text ELSE tasks.lease_owner END,
        last_owner       = CASE WHEN sqlc.arg(lease_owner)::text <> '' AND tasks.status = 'waiting'
                                THEN sqlc.arg(lease_owner)::text ELSE tasks.last_owner END,
        lease_expires_at = CASE WHEN sqlc.arg(lease_owner)::text <> '' AND tasks.status = 'waiting'
                                THEN now() + sqlc.arg(lease_ttl_seconds)::float8 * interval '1 second'
                                ELSE tasks.lease_expires_at END,
        lease_fence      = CASE WHEN sqlc.arg(lease_owner)::text <> '' AND tasks.status = 'waiting'
                                THEN tasks.lease_fence + 1 ELSE tasks.lease_fence END,
        updated_at       = now()
    WHERE tasks.id = @task_id::uuid AND EXISTS (SELECT 1 FROM d)
    RETURNING tasks.id, tasks.lease_fence, tasks.status
), s AS (
    INSERT INTO workflow_checkpoints AS c (task_id, state, event_seq) SELECT t.id, '{}', 1 FROM t
    ON CONFLICT (task_id) DO UPDATE SET event_seq = c.event_seq + 1
    RETURNING c.event_seq
), e AS (
    INSERT INTO task_events (task_id, seq, type, node, iteration, phase, data, created_at)
    SELECT @task_id::uuid, s.event_seq, @type::text, @node::text, @iteration::int, @phase::text, @data::jsonb,
           @created_at::timestamptz
    FROM s
    RETURNING seq
)
SELECT d.id, d.decided_at, e.seq, t.lease_fence, (t.status = 'running')::bool AS leased, i.payload_sha256,
       i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration, i.created_at AS i_created_at,
       i.payload AS i_payload, d.value AS d_value
FROM d, e, t, i;
