-- Retention of notification rows (migration 00085): finished deliveries
-- with their delivery log, and ended action links, older than a cutoff.

-- OutboxPruneDelete deletes at most max_rows finished deliveries (delivered
-- or failed) created before the cutoff and not attempted since (a
-- Redeliver of an old row counts as recent), with their attempts; pending
-- deliveries are never touched. Rows another transaction holds (a sender
-- recording them, a Redeliver) are skipped, to be pruned next time.
-- name: OutboxPruneDelete :one
WITH o AS (
    SELECT c.id FROM outbox c
    WHERE c.state <> 'pending' AND c.created_at < sqlc.arg(cutoff)::timestamptz
      AND NOT EXISTS (SELECT 1 FROM outbox_attempts r
                      WHERE r.outbox_id = c.id AND r.at >= sqlc.arg(cutoff)::timestamptz)
    ORDER BY c.created_at
    LIMIT sqlc.arg(max_rows)::int
    FOR UPDATE SKIP LOCKED
), ids AS (
    -- deleted by = ANY of one array: index lookups by key, where a join
    -- with o is planned (generic plans) as a hash join over the tables
    SELECT COALESCE(array_agg(id), '{}') AS ids FROM o
), a AS (
    DELETE FROM outbox_attempts r WHERE r.outbox_id = ANY ((SELECT ids FROM ids)::uuid[])
    RETURNING 1
), d AS (
    -- FOR UPDATE checked the row again under its lock: one redelivered
    -- meanwhile is pending, and not among o
    DELETE FROM outbox x WHERE x.id = ANY ((SELECT ids FROM ids)::uuid[])
    RETURNING 1
)
SELECT (SELECT count(*) FROM d)::bigint AS deliveries, (SELECT count(*) FROM a)::bigint AS attempts;

-- ActionLinkPruneDelete deletes at most max_rows action links that ended
-- (were used, or expired unused) before the cutoff.
-- name: ActionLinkPruneDelete :one
WITH l AS (
    SELECT k.token_hash FROM action_links k
    WHERE COALESCE(k.used_at, k.expires_at) < sqlc.arg(cutoff)::timestamptz
    ORDER BY COALESCE(k.used_at, k.expires_at)
    LIMIT sqlc.arg(max_rows)::int
    FOR UPDATE SKIP LOCKED
), d AS (
    DELETE FROM action_links x WHERE x.token_hash = ANY ((SELECT COALESCE(array_agg(token_hash), '{}') FROM l)::bytea[])
    RETURNING 1
)
SELECT count(*)::bigint FROM d;
