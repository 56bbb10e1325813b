-- name: PresenceTouch :one
-- Returns whether the row is new (the page just arrived).
INSERT INTO presence AS p (task_id, viewer, username, seen_at)
VALUES (sqlc.arg(task_id)::uuid, sqlc.arg(viewer)::text, sqlc.arg(username)::text, now())
ON CONFLICT (task_id, viewer) DO UPDATE SET seen_at = now()
RETURNING (xmax = 0)::bool AS inserted;

-- name: PresenceLeave :exec
DELETE FROM presence WHERE task_id = sqlc.arg(task_id)::uuid AND viewer = sqlc.arg(viewer)::text;

-- name: PresenceList :many
SELECT DISTINCT username FROM presence
WHERE task_id = sqlc.arg(task_id)::uuid AND seen_at > now() - sqlc.arg(stale_seconds)::float8 * interval '1 second'
ORDER BY username;

-- name: PresenceCounts :many
SELECT task_id, count(DISTINCT username)::int AS viewers FROM presence
WHERE task_id = ANY(sqlc.arg(task_ids)::uuid[]) AND seen_at > now() - sqlc.arg(stale_seconds)::float8 * interval '1 second'
GROUP BY task_id;

-- name: PresencePrune :exec
DELETE FROM presence WHERE seen_at < now() - interval '5 minutes';
