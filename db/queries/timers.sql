-- Durable timers of interrupts (SPEC §11): deadlines, reminders and
-- escalation steps. A keeper sleeps until TimerNextDue; TimersClaimDue
-- deletes the due rows it takes (SKIP LOCKED: replicas share a burst), and
-- the same transaction applies them, so each fires exactly once.

-- name: TimersInsert :exec
INSERT INTO interrupt_timers (interrupt_id, task_id, what, step, due_at, action, offset_s)
SELECT @interrupt_id::uuid, @task_id::uuid, x.what, (@steps::int[])[x.ord], (@due_ats::timestamptz[])[x.ord],
       (@actions::text[])[x.ord], (@offsets::float8[])[x.ord]
FROM unnest(@whats::text[]) WITH ORDINALITY AS x(what, ord);

-- name: TimerNextDue :one
SELECT due_at FROM interrupt_timers ORDER BY due_at LIMIT 1;

-- name: TimersClaimDue :many
DELETE FROM interrupt_timers t
USING (
    SELECT interrupt_id, what, step FROM interrupt_timers
    WHERE due_at <= now()
    ORDER BY due_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
) d
WHERE t.interrupt_id = d.interrupt_id AND t.what = d.what AND t.step = d.step
RETURNING t.*;

-- InterruptsExpire makes pending interrupts expired; those no longer
-- pending (decided meanwhile: the row lock orders the two) are left alone
-- and not returned.
-- name: InterruptsExpire :many
UPDATE interrupts i
SET status = 'expired', resolved_at = now(), claimed_by = NULL, claim_expires_at = NULL
WHERE i.id = ANY(@ids::uuid[]) AND i.status = 'pending'
RETURNING i.id, i.task_id, i.node, i.kind, i.iteration, i.created_at, i.deadline_at, i.payload_sha256;

-- name: InterruptsMarkOverdue :many
UPDATE interrupts i
SET overdue = true
WHERE i.id = ANY(@ids::uuid[]) AND i.status = 'pending' AND NOT i.overdue
RETURNING i.id, i.task_id, i.node, i.kind, i.iteration, i.created_at, i.deadline_at;

-- name: InterruptsEscalate :many
UPDATE interrupts i
SET escalation_level = (@levels::int[])[x.ord]
FROM unnest(@ids::uuid[]) WITH ORDINALITY AS x(id, ord)
WHERE i.id = x.id AND i.status = 'pending' AND i.escalation_level < (@levels::int[])[x.ord]
RETURNING i.id, i.task_id, i.node, i.kind, i.iteration, i.escalation_level;

-- InterruptsLockPending locks the pending interrupts among ids (a
-- reminder is written only for one still pending).
-- name: InterruptsLockPending :many
SELECT i.id, i.task_id, i.node, i.kind, i.iteration, i.escalation_level, i.deadline_at
FROM interrupts i
WHERE i.id = ANY(@ids::uuid[]) AND i.status = 'pending'
FOR UPDATE;

-- name: TasksFail :exec
UPDATE tasks t
SET status = 'failed', error = e.error, updated_at = now(), completed_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, lease_fence = t.lease_fence + 1
FROM unnest(@ids::uuid[]) WITH ORDINALITY AS x(id, ord)
JOIN unnest(@errors::text[]) WITH ORDINALITY AS e(error, ord) ON e.ord = x.ord
WHERE t.id = x.id AND t.status NOT IN ('succeeded', 'failed', 'cancelled');

-- name: TasksCancel :exec
UPDATE tasks t
SET status = 'cancelled', updated_at = now(), completed_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, lease_fence = t.lease_fence + 1
WHERE t.id = ANY(@ids::uuid[]) AND t.status NOT IN ('succeeded', 'failed', 'cancelled');

-- TasksApproveOnTimeout records system's approval of expired interrupts
-- and makes their tasks runnable.
-- name: TasksApproveOnTimeout :exec
WITH d AS (
    INSERT INTO decisions (interrupt_id, task_id, action, feedback, decided_by, payload_sha256)
    SELECT x.interrupt_id, y.task_id, 'approve', '', 'system', z.sha
    FROM unnest(@interrupt_ids::uuid[]) WITH ORDINALITY AS x(interrupt_id, ord)
    JOIN unnest(@task_ids::uuid[]) WITH ORDINALITY AS y(task_id, ord) ON y.ord = x.ord
    JOIN unnest(@shas::text[]) WITH ORDINALITY AS z(sha, ord) ON z.ord = x.ord
    RETURNING task_id
)
UPDATE tasks t SET status = 'queued', updated_at = now()
FROM d
WHERE t.id = d.task_id AND t.status = 'waiting';

-- EventsAppend appends events to any number of tasks in one statement,
-- each task's seqs gap-free from its checkpoint row's event_seq, in the order given. It is
-- the event path of writes outside node runs that touch many tasks at once
-- (timers).
-- name: EventsAppend :many
WITH ev AS (
    -- One unnest per array, joined on the position: subscripting a text
    -- array walks it from the start, quadratic over a batch.
    SELECT x.task_id, x.type, x.node, x.iteration, x.data::jsonb AS data, x.ord
    FROM ROWS FROM (unnest(@task_ids::uuid[]), unnest(@types::text[]), unnest(@nodes::text[]),
                    unnest(@iterations::int[]), unnest(@datas::text[]))
         WITH ORDINALITY AS x(task_id, type, node, iteration, data, ord)
), n AS (
    SELECT task_id, count(*)::bigint AS n FROM ev GROUP BY task_id
), u AS (
    UPDATE tasks SET updated_at = now()
    FROM n
    WHERE tasks.id = n.task_id
    RETURNING tasks.id
), s AS (
    INSERT INTO workflow_checkpoints AS c (task_id, state, event_seq)
    SELECT n.task_id, '{}', n.n FROM n JOIN u ON u.id = n.task_id
    ORDER BY n.task_id
    ON CONFLICT (task_id) DO UPDATE SET event_seq = c.event_seq + EXCLUDED.event_seq
    RETURNING c.task_id, c.event_seq
), t AS (
    SELECT s.task_id AS id, s.event_seq - n.n AS base FROM s JOIN n ON n.task_id = s.task_id
)
INSERT INTO task_events (task_id, seq, type, node, iteration, data, created_at)
SELECT ev.task_id, t.base + row_number() OVER (PARTITION BY ev.task_id ORDER BY ev.ord), ev.type, ev.node,
       ev.iteration, ev.data, now()
FROM ev JOIN t ON t.id = ev.task_id
RETURNING task_id, seq;

-- WebhookEndpointsExist tells a burst of timers whether any webhook
-- endpoint could take their deliveries.
-- name: WebhookEndpointsExist :one
SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE disabled_at IS NULL)::bool;

-- TimerDeadlineActions is what the deadline of each of these interrupts
-- does when it falls due (fail, approve, cancel, none), for the desk to say.
-- name: TimerDeadlineActions :many
SELECT interrupt_id, action FROM interrupt_timers
WHERE what = 'deadline' AND interrupt_id = ANY(@interrupt_ids::uuid[]);
