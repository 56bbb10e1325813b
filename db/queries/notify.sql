-- Notifications (SPEC §12, migration 00020): users' addresses, webhook
-- endpoints, the outbox and its delivery log, action links.

-- UserSetEmail sets (or, with '', clears) a user's email address. No row:
-- no such user.
-- name: UserSetEmail :one
WITH u AS (
    UPDATE users SET email = sqlc.arg(email)::text, updated_at = now()
    WHERE username = sqlc.arg(username)::text
    RETURNING id, username, email
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.updated', u.username, jsonb_build_object('email', u.email)
    FROM u
)
SELECT id FROM u;

-- UserSetSlack maps a Slack user id to a user ('' clears it). No row: no
-- such user.
-- name: UserSetSlack :one
WITH u AS (
    UPDATE users SET slack_id = sqlc.arg(slack_id)::text, updated_at = now()
    WHERE username = sqlc.arg(username)::text
    RETURNING id, username, slack_id
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.updated', u.username, jsonb_build_object('slack_id', u.slack_id)
    FROM u
)
SELECT id FROM u;

-- name: UserGetBySlack :one
SELECT * FROM users WHERE slack_id = @slack_id AND slack_id <> '';

-- name: WebhookInsert :one
WITH w AS (
    INSERT INTO webhook_endpoints (url, secret, events, created_by)
    VALUES (@url::text, @secret::text, @events::text[], @actor::text)
    RETURNING *
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT @actor::text, 'webhook.created', w.id::text, jsonb_build_object('url', w.url, 'events', to_jsonb(w.events))
    FROM w
)
SELECT * FROM w;

-- name: WebhookList :many
SELECT * FROM webhook_endpoints ORDER BY created_at, id;

-- name: WebhookGet :one
SELECT * FROM webhook_endpoints WHERE id = @id;

-- WebhookDelete removes an endpoint and its deliveries. No row: none.
-- name: WebhookDelete :one
WITH w AS (
    DELETE FROM webhook_endpoints WHERE id = @id::uuid RETURNING id, url
), o AS (
    -- no foreign key cascades (migrations 00081, 00086)
    DELETE FROM outbox WHERE endpoint_id = @id::uuid RETURNING id
), oa AS (
    DELETE FROM outbox_attempts WHERE outbox_id IN (SELECT id FROM o)
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT @actor::text, 'webhook.removed', w.id::text, jsonb_build_object('url', w.url)
    FROM w
)
SELECT id FROM w;

-- WebhookDisable stops deliveries to an endpoint (it answered 410 Gone).
-- name: WebhookDisable :exec
UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = @reason::text
WHERE id = @id::uuid AND disabled_at IS NULL;

-- OutboxEnqueue writes the deliveries of one event, in the transaction
-- that commits the event: a row per webhook endpoint that takes the type,
-- one for Slack (when slack), and one per user with an email address who
-- is to hear of it (when email). Who that is, by mode: 'deciders', the
-- users who may decide an interrupt of kind as the policy says (approvers
-- allowed the kind; unless any_decider, only those holding one of
-- decider_roles or named in decider_users; less the task's creator under
-- sod); 'creator', the task's creator; 'users', to_users; 'none', no
-- one. seq is the task's last event (the one that caused this).
-- born_lease > 0: the rows are born claimed (attempt 1, leased for that
-- many seconds) by the sender of the replica that commits them, which is
-- handed them after the commit: no claim statement, no wait for a poll.
-- Returns the rows written.
-- name: OutboxEnqueue :many
WITH t AS (
    SELECT tasks.id, c.event_seq, tasks.created_by
    FROM tasks JOIN workflow_checkpoints c ON c.task_id = tasks.id
    WHERE tasks.id = @task_id::uuid
    -- if_decided: only when this transaction recorded the interrupt's
    -- decision (a batch behind DecisionRecord, which may write nothing)
    AND (NOT @if_decided::bool OR EXISTS (
        SELECT 1 FROM decisions d
        WHERE d.interrupt_id = sqlc.narg(interrupt_id)::uuid AND d.xmin = pg_current_xact_id()::xid))
), c AS (
    SELECT (@born_lease::float8 > 0)::int AS attempts, now() + make_interval(secs => @born_lease::float8) AS next_at
), w AS (
    INSERT INTO outbox (event, task_id, interrupt_id, seq, channel, endpoint_id, attempts, next_at)
    SELECT @event::text, t.id, sqlc.narg(interrupt_id)::uuid, t.event_seq, 'webhook', e.id, c.attempts, c.next_at
    FROM t, c, webhook_endpoints e
    WHERE e.disabled_at IS NULL AND (e.events = '{}' OR @event::text = ANY (e.events))
    RETURNING *
), s AS (
    INSERT INTO outbox (event, task_id, interrupt_id, seq, channel, attempts, next_at)
    SELECT @event::text, t.id, sqlc.narg(interrupt_id)::uuid, t.event_seq, 'slack', c.attempts, c.next_at
    FROM t, c
    WHERE @slack::bool
    RETURNING *
), m AS (
    INSERT INTO outbox (event, task_id, interrupt_id, seq, channel, recipient, attempts, next_at)
    SELECT @event::text, t.id, sqlc.narg(interrupt_id)::uuid, t.event_seq, 'email', u.username, c.attempts, c.next_at
    FROM t, c, users u
    WHERE @email::bool AND u.email <> '' AND NOT u.disabled
      AND CASE @mode::text
            WHEN 'creator' THEN u.username = t.created_by
            WHEN 'users' THEN u.username = ANY (@to_users::text[])
            ELSE u.role IN ('approver', 'admin')
                 AND (u.kinds = '{}' OR @kind::text = ANY (u.kinds))
                 AND (@any_decider::bool OR u.role = ANY (@decider_roles::text[])
                      OR u.username = ANY (@decider_users::text[]))
                 AND NOT (@sod::bool AND u.username = t.created_by)
          END
    RETURNING *
)
SELECT * FROM w UNION ALL SELECT * FROM s UNION ALL SELECT * FROM m;

-- OutboxEnqueueWebhooks is OutboxEnqueue when neither Slack nor email
-- takes the event (the replica has neither, or the event goes to no one):
-- the rows for the webhook endpoints only. PostgreSQL builds the executor
-- state of OutboxEnqueue's three inserts on each execution, used or not.
-- name: OutboxEnqueueWebhooks :many
WITH t AS (
    SELECT tasks.id, c.event_seq
    FROM tasks JOIN workflow_checkpoints c ON c.task_id = tasks.id
    WHERE tasks.id = @task_id::uuid
    AND (NOT @if_decided::bool OR EXISTS (
        SELECT 1 FROM decisions d
        WHERE d.interrupt_id = sqlc.narg(interrupt_id)::uuid AND d.xmin = pg_current_xact_id()::xid))
)
INSERT INTO outbox (event, task_id, interrupt_id, seq, channel, endpoint_id, attempts, next_at)
SELECT @event::text, t.id, sqlc.narg(interrupt_id)::uuid, t.event_seq, 'webhook', e.id, (@born_lease::float8 > 0)::int,
       now() + make_interval(secs => @born_lease::float8)
FROM t, webhook_endpoints e
WHERE e.disabled_at IS NULL AND (e.events = '{}' OR @event::text = ANY (e.events))
RETURNING *;

-- OutboxClaim takes up to max due deliveries for a sender: their next_at
-- moves past the longest delivery (lease_seconds), so a sender that dies
-- leaves them due again. Destinations (an endpoint id, 'email', 'slack')
-- in busy are skipped: their sender is saturated, and the others go on.
-- name: OutboxClaim :many
UPDATE outbox o
SET attempts = o.attempts + 1,
    next_at  = now() + sqlc.arg(lease_seconds)::float8 * interval '1 second'
WHERE o.id IN (
    SELECT c.id FROM outbox c
    WHERE c.state = 'pending' AND c.next_at <= now()
      AND COALESCE(c.endpoint_id::text, c.channel) <> ALL (sqlc.arg(busy)::text[])
    ORDER BY c.next_at
    LIMIT sqlc.arg(max_rows)::int
    FOR UPDATE SKIP LOCKED
)
RETURNING o.*;

-- OutboxNextDue is when the earliest pending delivery to a destination
-- not in busy is due (in a day when none is).
-- name: OutboxNextDue :one
SELECT COALESCE(min(next_at), now() + interval '1 day')::timestamptz FROM outbox
WHERE state = 'pending' AND COALESCE(endpoint_id::text, channel) <> ALL (sqlc.arg(busy)::text[]);

-- OutboxDone records one attempt: its log row, and the row's new state.
-- The attempt number fences it: a sender whose claim lapsed and was taken
-- over by another writes nothing.
-- OutboxDoneMany records the attempts of a batch of deliveries in one
-- statement: each row's state and its delivery log entry. A row whose
-- attempt number moved on was claimed again by another sender (its lease
-- lapsed) and is left alone; the ids returned are those recorded.
-- payloads: '' for none (a body is kept from the first failed attempt on).
-- name: OutboxDoneMany :many
WITH r AS (
    -- unnests in one SELECT list zip arrays of the same length
    SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::int[]) AS attempt, unnest(@states::text[]) AS state,
           unnest(@next_ats::timestamptz[]) AS next_at, unnest(@payloads::text[]) AS payload,
           unnest(@errors::text[]) AS error, unnest(@duration_ms::bigint[]) AS duration_ms,
           unnest(@status_codes::int[]) AS status_code
), o AS (
    UPDATE outbox
    SET state        = r.state,
        next_at      = CASE WHEN r.state = 'pending' THEN r.next_at ELSE outbox.next_at END,
        -- the body is kept for the retries of an attempt that failed;
        -- a delivered one is not written again (a Redeliver builds it
        -- afresh): the body was most of the WAL a delivery cost
        payload      = CASE WHEN r.state = 'pending' THEN COALESCE(outbox.payload, NULLIF(r.payload, '')::jsonb)
                            ELSE outbox.payload END,
        last_error   = r.error,
        delivered_at = CASE WHEN r.state = 'delivered' THEN now() END
    FROM r
    WHERE outbox.id = r.id AND outbox.attempts = r.attempt
    RETURNING outbox.id, r.attempt, r.duration_ms, r.status_code, r.state, r.error
), a AS (
    INSERT INTO outbox_attempts (outbox_id, attempt, duration_ms, status_code, ok, error)
    SELECT o.id, o.attempt, o.duration_ms, o.status_code, o.state = 'delivered', o.error FROM o
)
SELECT o.id FROM o;
-- OutboxRelease hands back claimed deliveries that were not attempted
-- (their sender stopped first): due now, their attempt not counted. A row
-- whose attempt number moved on is another sender's, and left alone.
-- name: OutboxRelease :execrows
UPDATE outbox o
SET attempts = o.attempts - 1, next_at = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::int[]) AS attempt) r
WHERE o.id = r.id AND o.attempts = r.attempt AND o.state = 'pending';

-- name: OutboxRedeliver :one
UPDATE outbox SET state = 'pending', next_at = now(), delivered_at = NULL
WHERE id = @id::uuid
RETURNING id;

-- OutboxByEndpoint lists an endpoint's latest deliveries.
-- name: OutboxByEndpoint :many
SELECT * FROM outbox WHERE endpoint_id = @endpoint_id::uuid ORDER BY created_at DESC, id DESC LIMIT @max_rows::int;

-- name: OutboxAttempts :many
SELECT * FROM outbox_attempts WHERE outbox_id = ANY (@ids::uuid[]) ORDER BY outbox_id, attempt;

-- name: DecisionByInterrupt :one
SELECT * FROM decisions WHERE interrupt_id = @interrupt_id::uuid;
-- name: OutboxGet :one
SELECT * FROM outbox WHERE id = @id;

-- name: ActionLinkInsert :exec
INSERT INTO action_links (token_hash, interrupt_id, task_id, recipient, outbox_id, expires_at)
VALUES (@token_hash, @interrupt_id, @task_id, @recipient, sqlc.narg(outbox_id)::uuid, @expires_at);

-- name: ActionLinkGet :one
SELECT * FROM action_links WHERE token_hash = @token_hash;

-- ActionLinkSpend uses every link of the recipient for the interrupt: one
-- decision per person and interrupt, whichever of their emails it came
-- from. No row: already spent or ended.
-- name: ActionLinkSpend :one
WITH l AS (
    SELECT k.interrupt_id, k.recipient FROM action_links k
    WHERE k.token_hash = sqlc.arg(token_hash)::bytea AND k.used_at IS NULL AND k.expires_at > now()
)
UPDATE action_links a SET used_at = now()
FROM l
WHERE a.interrupt_id = l.interrupt_id AND a.recipient = l.recipient AND a.used_at IS NULL
RETURNING a.token_hash;

-- OutboxSubjects reads what a batch of deliveries is about in one round
-- trip: the tasks of task_ids, each with those of interrupt_ids that are
-- its own (one row per interrupt; a task with none of them, one row of
-- NULLs) and their decisions. Index lookups by = ANY: the batch is small,
-- the tables are not.
-- name: OutboxSubjects :many
WITH batch_interrupts AS MATERIALIZED (
    SELECT * FROM interrupts WHERE id = ANY (@interrupt_ids::uuid[])
)
SELECT sqlc.embed(t),
       i.id AS i_id, i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at,
       i.deadline_at AS i_deadline_at, i.overdue AS i_overdue, i.escalation_level AS i_escalation_level,
       i.claimed_by AS i_claimed_by, i.claim_expires_at AS i_claim_expires_at, i.payload_sha256 AS i_payload_sha256,
       d.id AS d_id, d.action AS d_action, d.feedback AS d_feedback, d.value AS d_value,
       d.decided_by AS d_decided_by, d.decided_at AS d_decided_at, d.payload_sha256 AS d_payload_sha256
FROM tasks t
LEFT JOIN batch_interrupts i ON i.task_id = t.id
LEFT JOIN decisions d ON d.interrupt_id = i.id
WHERE t.id = ANY (@task_ids::uuid[]);
