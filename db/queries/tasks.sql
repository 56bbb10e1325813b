-- name: TaskInsert :exec
INSERT INTO tasks (id, workflow, title, input, options, status, current_node, created_by, created_at, updated_at,
                   definition_version, forked_from_task, forked_from_step)
VALUES (@id, @workflow, @title, @input, @options, @status, @current_node, @created_by, @created_at, @created_at,
        @definition_version, sqlc.narg(forked_from_task)::uuid, sqlc.narg(forked_from_step)::int);

-- name: TaskGet :one
SELECT * FROM tasks WHERE id = @id;

-- TaskCommit is a node run's whole commit in one statement: its events
-- with gap-free seqs taken from the checkpoint row's event_seq, the
-- checkpoint (when save_checkpoint) with its copy in the history, and the
-- task row when touch (a change of status, a result or error, or a row not
-- written for a while: a running task's row is not rewritten by every
-- node). The fence is checked under a share lock on the task row (f): a
-- claim's SKIP LOCKED passes the row by, and a cancel or a
-- decision, which move the fence, wait for this commit. A commit always
-- carries at least one event; when the fence does not match, the first
-- seq calls gatehouse_lease_lost, which raises and aborts the transaction,
-- so a writer that lost its lease writes nothing at all. first_commit: the
-- task's first commit, which inserts its checkpoint row (the task row
-- comes from TaskInsert in the same transaction). The events come as one
-- JSON array of objects (type, node, iteration, phase, duration_ms, data,
-- at).
-- name: TaskCommit :many
WITH f AS (
    SELECT id FROM tasks WHERE id = @id::uuid AND lease_fence = @fence::bigint FOR SHARE
), t AS (
    UPDATE tasks
    SET status       = @status,
        current_node = COALESCE(NULLIF(@current_node::text, ''), tasks.current_node),
        result       = COALESCE(sqlc.narg(result)::jsonb, tasks.result),
        error        = @error,
        updated_at   = now(),
        completed_at = CASE WHEN @status::text IN ('succeeded', 'failed', 'cancelled') THEN now() END,
        -- leaving the running status hands the lease back
        lease_owner      = CASE WHEN @status::text = 'running' THEN tasks.lease_owner END,
        lease_expires_at = CASE WHEN @status::text = 'running' THEN tasks.lease_expires_at END
    FROM f
    WHERE tasks.id = f.id AND @touch::bool
), cpu AS (
    UPDATE workflow_checkpoints AS w
    SET state                = CASE WHEN @save_checkpoint::bool THEN @state::jsonb ELSE w.state END,
        state_refs           = CASE WHEN @save_checkpoint::bool THEN @state_refs::jsonb ELSE w.state_refs END,
        last_node_id         = CASE WHEN @save_checkpoint::bool THEN @last_node_id::text ELSE w.last_node_id END,
        updated_at           = CASE WHEN @save_checkpoint::bool THEN @cp_updated_at::timestamptz ELSE w.updated_at END,
        step                 = CASE WHEN @save_checkpoint::bool THEN @step::int ELSE w.step END,
        next_node_id         = CASE WHEN @save_checkpoint::bool THEN @next_node_id::text ELSE w.next_node_id END,
        iterations           = CASE WHEN @save_checkpoint::bool THEN @iterations::jsonb ELSE w.iterations END,
        answers              = CASE WHEN @save_checkpoint::bool THEN @answers::jsonb ELSE w.answers END,
        pending_interrupt_id = CASE WHEN @save_checkpoint::bool THEN sqlc.narg(pending_interrupt_id)::uuid
                                    ELSE w.pending_interrupt_id END,
        event_seq            = w.event_seq + jsonb_array_length(@events::jsonb)
    FROM f
    WHERE w.task_id = f.id AND NOT @first_commit::bool
    RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers,
              w.pending_interrupt_id, w.updated_at, w.state_refs, w.event_seq
), cpi AS (
    INSERT INTO workflow_checkpoints AS w (task_id, state, last_node_id, updated_at, step, next_node_id, iterations,
                                           answers, pending_interrupt_id, state_refs, event_seq, lease_fence)
    SELECT f.id, @state::jsonb, @last_node_id::text, @cp_updated_at::timestamptz, @step::int, @next_node_id::text,
           @iterations::jsonb, @answers::jsonb, sqlc.narg(pending_interrupt_id)::uuid, @state_refs::jsonb,
           jsonb_array_length(@events::jsonb), @fence::bigint
    FROM f
    WHERE @first_commit::bool
    RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers,
              w.pending_interrupt_id, w.updated_at, w.state_refs, w.event_seq
), cp AS (
    SELECT * FROM cpu UNION ALL SELECT * FROM cpi
), h AS (
    INSERT INTO checkpoint_history (task_id, step, reason, last_node_id, next_node_id, state, iterations, answers,
                                    pending_interrupt_id, created_at, state_refs)
    SELECT task_id, step, @reason::text, last_node_id, next_node_id, state, iterations, answers, pending_interrupt_id,
           updated_at, state_refs
    FROM cp
    WHERE @save_checkpoint::bool
)
INSERT INTO task_events (task_id, seq, type, node, iteration, phase, duration_ms, data, created_at)
SELECT @id::uuid,
       CASE WHEN cp.event_seq IS NULL THEN gatehouse_lease_lost(@id::uuid, @fence::bigint)
            ELSE cp.event_seq - jsonb_array_length(@events::jsonb) + e.ord END,
       e.ev->>'type', e.ev->>'node', (e.ev->>'iteration')::int, e.ev->>'phase', (e.ev->>'duration_ms')::bigint,
       e.ev->'data', (e.ev->>'at')::timestamptz
FROM jsonb_array_elements(@events::jsonb) WITH ORDINALITY AS e(ev, ord)
LEFT JOIN cp ON true
RETURNING seq;

-- TaskCommitFirst is TaskCommit for a task's first commit, which has a
-- checkpoint: the task row was inserted by TaskInsert in the same
-- transaction, with the commit's status and current node, and no one else
-- can have moved its fence, so there is no task row to lock or write,
-- only the checkpoint row to insert (with the fence's copy), its history
-- and the events from seq 1.
-- name: TaskCommitFirst :many
WITH cp AS (
    INSERT INTO workflow_checkpoints AS w (task_id, state, last_node_id, updated_at, step, next_node_id, iterations,
                                           answers, pending_interrupt_id, state_refs, event_seq, lease_fence)
    VALUES (@id::uuid, @state::jsonb, @last_node_id::text, @cp_updated_at::timestamptz, @step::int, @next_node_id::text,
            @iterations::jsonb, @answers::jsonb, sqlc.narg(pending_interrupt_id)::uuid, @state_refs::jsonb,
            jsonb_array_length(@events::jsonb), @fence::bigint)
    RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers,
              w.pending_interrupt_id, w.updated_at, w.state_refs
), h AS (
    INSERT INTO checkpoint_history (task_id, step, reason, last_node_id, next_node_id, state, iterations, answers,
                                    pending_interrupt_id, created_at, state_refs)
    SELECT task_id, step, @reason::text, last_node_id, next_node_id, state, iterations, answers, pending_interrupt_id,
           updated_at, state_refs
    FROM cp
)
INSERT INTO task_events (task_id, seq, type, node, iteration, phase, duration_ms, data, created_at)
SELECT cp.task_id, e.ord, e.ev->>'type', e.ev->>'node', (e.ev->>'iteration')::int, e.ev->>'phase',
       (e.ev->>'duration_ms')::bigint, e.ev->'data', (e.ev->>'at')::timestamptz
FROM jsonb_array_elements(@events::jsonb) WITH ORDINALITY AS e(ev, ord), cp
RETURNING seq;

-- TaskCommitQuiet is TaskCommit for the usual step: not a task's first
-- commit, quiet (the task row is not written), with a checkpoint.
-- PostgreSQL builds the executor state of every branch of a statement on
-- each execution, used or not: TaskCommit's update of the task row (its
-- indexes opened, its CASE lists compiled) and its insert of a first
-- checkpoint cost a quarter of a step's statement though the usual step
-- runs neither. The fence is checked on the checkpoint row, which carries
-- a copy of the task's (00101): no lock on the task row. Same counter,
-- history and events as TaskCommit.
-- name: TaskCommitQuiet :many
WITH cp AS (
    UPDATE workflow_checkpoints AS w
    SET state                = @state::jsonb,
        state_refs           = @state_refs::jsonb,
        last_node_id         = @last_node_id::text,
        updated_at           = @cp_updated_at::timestamptz,
        step                 = @step::int,
        next_node_id         = @next_node_id::text,
        iterations           = @iterations::jsonb,
        answers              = @answers::jsonb,
        pending_interrupt_id = sqlc.narg(pending_interrupt_id)::uuid,
        event_seq            = w.event_seq + jsonb_array_length(@events::jsonb)
    WHERE w.task_id = @id::uuid AND w.lease_fence = @fence::bigint
    RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers,
              w.pending_interrupt_id, w.updated_at, w.state_refs, w.event_seq
), h AS (
    INSERT INTO checkpoint_history (task_id, step, reason, last_node_id, next_node_id, state, iterations, answers,
                                    pending_interrupt_id, created_at, state_refs)
    SELECT task_id, step, @reason::text, last_node_id, next_node_id, state, iterations, answers, pending_interrupt_id,
           updated_at, state_refs
    FROM cp
)
INSERT INTO task_events (task_id, seq, type, node, iteration, phase, duration_ms, data, created_at)
SELECT @id::uuid,
       CASE WHEN cp.event_seq IS NULL THEN gatehouse_lease_lost(@id::uuid, @fence::bigint)
            ELSE cp.event_seq - jsonb_array_length(@events::jsonb) + e.ord END,
       e.ev->>'type', e.ev->>'node', (e.ev->>'iteration')::int, e.ev->>'phase', (e.ev->>'duration_ms')::bigint,
       e.ev->'data', (e.ev->>'at')::timestamptz
FROM jsonb_array_elements(@events::jsonb) WITH ORDINALITY AS e(ev, ord)
LEFT JOIN cp ON true
RETURNING seq;

-- NotifyMany sends NOTIFYs: channels[i] gets payloads[i]. The store sends
-- them after the commit they announce, in their own asynchronously committed
-- transaction: a transaction that notifies holds a database-wide lock until
-- its commit is flushed, which would serialise every commit of every worker.
-- The statement sets synchronous_commit off for its own (implicit)
-- transaction itself: a TxAsyncCommit before it was a second statement in
-- every send.
-- StateBlobsPut stores the blobs of a commit's changed large state fields
-- (00050_state_blobs.sql). It runs in the commit's batch, which is one
-- transaction: when the fenced update of the task fails, these go too.
-- name: StateBlobsPut :exec
INSERT INTO state_blobs (task_id, hash, value)
SELECT @task_id::uuid, (@hashes::bytea[])[i], (@blob_values::text[])[i]
FROM generate_subscripts(@hashes::bytea[], 1) AS i
ON CONFLICT (task_id, hash) DO NOTHING;

-- name: NotifyMany :exec
SELECT pg_notify((sqlc.arg(channels)::text[])[i], (sqlc.arg(payloads)::text[])[i])
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit,
     generate_subscripts(sqlc.arg(channels)::text[], 1) AS i;

-- TaskClaim takes up to max runnable tasks for owner: queued ones, and
-- running ones whose lease expired (their worker died). The fence moves on,
-- so a worker that still believes it holds the lease can write nothing.
-- Each claimed task comes with what TaskSnapshot reads of it (the same
-- columns in the same order; no blob value left out), then its event seq:
-- its run starts from this snapshot, without a round trip to load it. The
-- task's columns are the claim's RETURNING (its new status and fence); the
-- checkpoint, interrupt and decision are not written by the claim.
-- name: TaskClaim :many
WITH claimed AS (
    UPDATE tasks
    SET status           = 'running',
        lease_owner      = sqlc.arg(owner)::text,
        last_owner       = sqlc.arg(owner)::text,
        lease_expires_at = now() + sqlc.arg(ttl_seconds)::float8 * interval '1 second',
        lease_fence      = lease_fence + 1,
        -- the run's first commits leave the row alone (Commit.Quiet)
        updated_at       = now()
    WHERE id IN (
        SELECT c.id FROM tasks c
        WHERE c.status IN ('queued', 'running') -- tasks_runnable_idx
          AND (c.status = 'queued' OR c.lease_expires_at IS NULL OR c.lease_expires_at < now())
        ORDER BY c.created_at, c.id
        LIMIT sqlc.arg(max_tasks)::int
        -- not FOR UPDATE: a quiet commit in flight holds the checkpoint
        -- row, which the claim's fence copy waits for, and its foreign
        -- keys' share locks on the task row must not wait for the claim
        FOR NO KEY UPDATE SKIP LOCKED
    )
    RETURNING id, workflow, title, input, options, status, current_node, result, error,
              created_by, created_at, updated_at, completed_at, lease_fence
)
SELECT t.id, t.workflow, t.title, t.input, t.options, t.status, t.current_node, t.result, t.error,
       t.created_by, t.created_at, t.updated_at, t.completed_at, t.lease_fence,
       c.state, c.last_node_id, c.step, c.next_node_id, c.iterations, c.answers, c.pending_interrupt_id,
       c.updated_at AS checkpoint_updated_at, c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values,
       i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at,
       d.id AS d_id, d.action AS d_action, d.feedback AS d_feedback, d.value AS d_value,
       d.decided_by AS d_decided_by, d.decided_at AS d_decided_at,
       c.event_seq
FROM claimed t
-- LIMIT 1 (task_id is the key) keeps the subquery from being pulled up into
-- a join the planner may hash over the whole table: a claim reads a few
-- checkpoints by key.
JOIN LATERAL (SELECT * FROM workflow_checkpoints wc WHERE wc.task_id = t.id LIMIT 1) c ON true
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys,
                          array_agg(b.value ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')
                   -- a one-time filter, as TaskSnapshot's
                   WHERE c.state_refs <> '{}'::jsonb) sb ON true
LEFT JOIN interrupts i ON i.id = c.pending_interrupt_id
LEFT JOIN decisions d ON d.interrupt_id = c.pending_interrupt_id;

-- TaskClaimOne is TaskClaim for one task: `gatehouse run` executes only the
-- task it follows.
-- name: TaskClaimOne :many
UPDATE tasks
SET status           = 'running',
    lease_owner      = sqlc.arg(owner)::text,
    last_owner       = sqlc.arg(owner)::text,
    lease_expires_at = now() + sqlc.arg(ttl_seconds)::float8 * interval '1 second',
    lease_fence      = lease_fence + 1,
    updated_at       = now()
WHERE id IN (
    SELECT c.id FROM tasks c
    WHERE c.id = sqlc.arg(id)::uuid
      AND (c.status = 'queued'
           OR (c.status = 'running' AND (c.lease_expires_at IS NULL OR c.lease_expires_at < now())))
    FOR NO KEY UPDATE SKIP LOCKED -- as TaskClaim
)
RETURNING id, lease_fence,
          (SELECT c.event_seq FROM workflow_checkpoints c WHERE c.task_id = tasks.id)::bigint AS event_seq;

-- TaskTouch brings a running task's row up to the node it runs now
-- (graph.Toucher).
-- name: TaskTouch :exec
UPDATE tasks SET current_node = @node::text, updated_at = now()
WHERE id = @id::uuid AND lease_fence = @fence::bigint AND status = 'running';

-- name: TaskHeartbeat :execrows
UPDATE tasks SET lease_expires_at = now() + sqlc.arg(ttl_seconds)::float8 * interval '1 second'
WHERE id = sqlc.arg(id) AND lease_fence = sqlc.arg(fence) AND status = 'running';

-- TaskRelease hands a lease back early (shutdown): the task is runnable at once.
-- name: TaskRelease :execrows
UPDATE tasks SET lease_owner = NULL, lease_expires_at = now() - interval '1 second'
WHERE id = @id AND lease_fence = @fence AND status = 'running';

-- name: TaskNextExpiry :one
SELECT COALESCE(min(lease_expires_at), now() + interval '1 hour')::timestamptz FROM tasks WHERE status = 'running';

-- TaskCancel ends a task that has not ended, moving the fence on so that a
-- worker running it writes nothing more, and appends task.cancelled.
-- name: TaskCancel :one
WITH t AS (
    UPDATE tasks
    SET status = 'cancelled', lease_fence = lease_fence + 1, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = now(), completed_at = now()
    WHERE id = @id::uuid AND status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING id
), s AS (
    -- (an upsert: a task without a checkpoint row, which the product never
    -- makes, still counts its events)
    INSERT INTO workflow_checkpoints AS c (task_id, state, event_seq) SELECT t.id, '{}', 1 FROM t
    ON CONFLICT (task_id) DO UPDATE SET event_seq = c.event_seq + 1
    RETURNING c.event_seq
)
INSERT INTO task_events (task_id, seq, type, data, created_at)
SELECT @id::uuid, s.event_seq, 'task.cancelled', @data::jsonb, now()
FROM s
RETURNING seq;

-- name: InterruptsCancelPending :exec
UPDATE interrupts SET status = 'cancelled', resolved_at = now() WHERE task_id = @task_id AND status = 'pending';

-- TaskRetry makes a failed task runnable again; it resumes from its last
-- checkpoint.
-- name: TaskRetry :one
WITH t AS (
    UPDATE tasks
    SET status = 'queued', error = '', completed_at = NULL, updated_at = now()
    WHERE id = @id::uuid AND status = 'failed'
    RETURNING id, current_node
), s AS (
    INSERT INTO workflow_checkpoints AS c (task_id, state, event_seq) SELECT t.id, '{}', 1 FROM t
    ON CONFLICT (task_id) DO UPDATE SET event_seq = c.event_seq + 1
    RETURNING c.event_seq
)
INSERT INTO task_events (task_id, seq, type, node, data, created_at)
SELECT @id::uuid, s.event_seq, 'task.retried', t.current_node, @data::jsonb, now()
FROM s, t
RETURNING seq;

-- TxAsyncCommit lets the current transaction commit without waiting for its
-- WAL flush. Only for commits the engine can redo from the previous
-- checkpoint (a node's start, a retry notice): a database crash may lose
-- them, never a later synchronous commit, which flushes them too.
-- name: TxAsyncCommit :exec
SELECT set_config('synchronous_commit', 'off', true);

-- TxClaimPlans is TxAsyncCommit for a claim's batch, and keeps bitmap and
-- sequential scans out of TaskClaim's plans. A plan is made on a
-- connection the first times a claim runs there, and then kept. On a young
-- tasks table (few pages, no statistics) PostgreSQL costs the runnable
-- tasks at a row or two, and picks a bitmap scan of tasks_runnable_idx
-- and a sort. That plan stays while the table grows, and on every claim
-- it visits every entry of the index, the dead ones included (tasks that
-- ran and ended), because a bitmap scan never marks an entry dead as an
-- index scan does. In BenchmarkThroughput16 a claim of three tasks
-- visited 1,608 entries and 115 heap pages, and a claim took 300 µs. The
-- ordered index scan stops at the first tasks it can lock. The same young
-- plan read state_blobs by a sequential scan, which a large state would
-- pay on every claim.
-- name: TxClaimPlans :exec
SELECT set_config('synchronous_commit', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_seqscan', 'off', true);

-- TxGenericPlans makes the rest of the transaction's statements run on
-- their generic plans. The engine's writes are lookups and inserts by key,
-- whose generic plan is the custom one; left to choose, PostgreSQL planned
-- some of them afresh on every execution (ArtifactInsertMany: 1,040 plans
-- in 1,024 calls at 290 µs each) and every statement five times on every
-- connection before it tried the generic plan.
-- name: TxGenericPlans :exec
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- TaskCountByStatus counts tasks per status (the dashboard) from
-- row_counts and its deltas (00052_row_counts.sql); deltas is how many
-- delta rows it added, for the caller to fold them when they pile up.
-- name: TaskCountByStatus :many
WITH d AS (SELECT key, delta FROM row_count_deltas WHERE scope = 'task_status')
SELECT key AS status, sum(n)::int AS tasks, (SELECT count(*) FROM d)::int AS deltas
FROM (SELECT key, n FROM row_counts WHERE scope = 'task_status'
      UNION ALL SELECT key, delta::bigint FROM d) x
GROUP BY key
HAVING sum(n) <> 0;

-- RowCountsFold moves the deltas into row_counts, one folder at a time
-- (another that finds the lock taken does nothing), rows in key order.
-- name: RowCountsFold :exec
WITH lock AS (SELECT pg_try_advisory_xact_lock(7166824916284798836) AS ok),
moved AS (
    DELETE FROM row_count_deltas WHERE (SELECT ok FROM lock) RETURNING scope, key, delta
)
INSERT INTO row_counts AS c (scope, key, n)
SELECT scope, key, sum(delta) FROM moved GROUP BY scope, key ORDER BY scope, key
ON CONFLICT (scope, key) DO UPDATE SET n = c.n + EXCLUDED.n;
