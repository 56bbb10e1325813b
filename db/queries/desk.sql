-- DeskInboxPage is one page of the inbox as a work queue: pending
-- interrupts, of one kind or any, those with the nearest deadline first
-- (overdue ones first of all), then those without one, oldest first; by
-- keyset on (deadline or infinity, created_at, id) after a cursor, each
-- with its task title and workflow (interrupts_pending_due_idx, no sort),
-- and the channel an approval request came through (task_via: api, mcp).
-- DeskInboxPageFiltered adds the claim and overdue filters. A missing cursor reads from the start; a cursor without a
-- deadline (after_at set, after_due NULL) continues among those without.
-- name: DeskInboxPage :many
SELECT sqlc.embed(i), t.title AS task_title, t.workflow AS task_workflow, t.created_by AS task_created_by,
       (CASE WHEN t.workflow = 'request' THEN COALESCE(t.input->>'via', '') ELSE '' END)::text AS task_via
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = 'pending'
  AND (sqlc.narg(kind)::text IS NULL OR i.kind = sqlc.narg(kind)::text)
  AND (COALESCE(i.deadline_at, 'infinity'::timestamptz), i.created_at, i.id) >
      (COALESCE(sqlc.narg(after_due)::timestamptz,
                CASE WHEN sqlc.narg(after_at)::timestamptz IS NULL THEN '-infinity'::timestamptz ELSE 'infinity'::timestamptz END),
       COALESCE(sqlc.narg(after_at)::timestamptz, '-infinity'::timestamptz),
       COALESCE(sqlc.narg(after_id)::uuid, '00000000-0000-0000-0000-000000000000'::uuid))
ORDER BY COALESCE(i.deadline_at, 'infinity'::timestamptz), i.created_at, i.id
LIMIT sqlc.arg(max_rows)::int;

-- DeskInboxPageFiltered is DeskInboxPage with the work-queue filters:
-- claim 'mine' (held by who), 'unclaimed' (nobody holds an unexpired
-- claim), overdue (the deadline passed). Kept apart so that the unfiltered
-- page's generic plan keeps walking the index.
-- name: DeskInboxPageFiltered :many
SELECT sqlc.embed(i), t.title AS task_title, t.workflow AS task_workflow, t.created_by AS task_created_by,
       (CASE WHEN t.workflow = 'request' THEN COALESCE(t.input->>'via', '') ELSE '' END)::text AS task_via
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = 'pending'
  AND (sqlc.narg(kind)::text IS NULL OR i.kind = sqlc.narg(kind)::text)
  AND (sqlc.arg(claim)::text = ''
       OR (sqlc.arg(claim)::text = 'mine' AND i.claimed_by = sqlc.arg(who)::text AND i.claim_expires_at > now())
       OR (sqlc.arg(claim)::text = 'unclaimed' AND (i.claimed_by IS NULL OR i.claim_expires_at <= now())))
  AND (NOT sqlc.arg(overdue)::bool OR i.deadline_at <= now())
  AND (COALESCE(i.deadline_at, 'infinity'::timestamptz), i.created_at, i.id) >
      (COALESCE(sqlc.narg(after_due)::timestamptz,
                CASE WHEN sqlc.narg(after_at)::timestamptz IS NULL THEN '-infinity'::timestamptz ELSE 'infinity'::timestamptz END),
       COALESCE(sqlc.narg(after_at)::timestamptz, '-infinity'::timestamptz),
       COALESCE(sqlc.narg(after_id)::uuid, '00000000-0000-0000-0000-000000000000'::uuid))
ORDER BY COALESCE(i.deadline_at, 'infinity'::timestamptz), i.created_at, i.id
LIMIT sqlc.arg(max_rows)::int;
