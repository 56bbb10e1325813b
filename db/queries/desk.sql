-- DeskInboxPage is one page of the inbox: pending interrupts, of one kind
-- or any, oldest first, by keyset on (created_at, id) after a cursor, each
-- with its task title and workflow. It walks interrupts_pending_idx. A
-- missing cursor reads from the start (minus infinity, the zero uuid).
-- name: DeskInboxPage :many
SELECT sqlc.embed(i), t.title AS task_title, t.workflow AS task_workflow, t.created_by AS task_created_by
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = 'pending'
  AND (sqlc.narg(kind)::text IS NULL OR i.kind = sqlc.narg(kind)::text)
  AND (i.created_at, i.id) > (COALESCE(sqlc.narg(after_at)::timestamptz, '-infinity'::timestamptz),
                              COALESCE(sqlc.narg(after_id)::uuid, '00000000-0000-0000-0000-000000000000'::uuid))
ORDER BY i.created_at, i.id
LIMIT sqlc.arg(max_rows)::int;
