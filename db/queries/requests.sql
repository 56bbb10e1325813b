-- RequestInsert writes a request's row, first in its task's first commit
-- (one transaction). An idempotency key its principal used already fails
-- it on requests_idempotency_idx (unique_violation), and with it the
-- whole commit: read that request with RequestByKey. created_at is its
-- task's.
-- name: RequestInsert :exec
INSERT INTO requests (id, created_by, idempotency_key, body_sha256, kind, body, callback_url, callback_secret, via, created_at)
VALUES (@id::uuid, @created_by::text, sqlc.narg(idempotency_key)::text, @body_sha256::text, @kind::text, @body::jsonb,
        @callback_url::text, @callback_secret::text, @via::text, @created_at::timestamptz);

-- name: RequestByKey :one
SELECT id, body_sha256, callback_secret FROM requests WHERE created_by = @created_by::text AND idempotency_key = @idempotency_key::text;

-- RequestGet reads a request with where its task stands.
-- name: RequestGet :one
SELECT * FROM request_rows WHERE id = @id::uuid;

-- RequestList lists requests newest first, after the cursor (created_at,
-- id) when given, of a status and a kind when given (empty: any).
-- name: RequestList :many
SELECT * FROM request_rows
WHERE (@kind::text = '' OR kind = @kind::text)
  AND (@status::text = '' OR status = @status::text)
  AND (sqlc.narg(after_at)::timestamptz IS NULL OR (created_at, id) < (sqlc.narg(after_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows::int;

-- RequestOrphans are rows older than a moment whose task was never
-- created: written by a version that wrote a request and its task in
-- two transactions, and stopped between them.
-- name: RequestOrphans :many
SELECT r.id, r.created_by, r.kind, r.body, r.via FROM requests r
WHERE r.created_at < @before::timestamptz AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = r.id)
ORDER BY r.created_at LIMIT 100;

-- RequestCallback is where a request's callback goes and its secret.
-- name: RequestCallback :one
SELECT callback_url, callback_secret FROM requests WHERE id = @id::uuid;

-- RequestsSettled lists which of the requests are no longer pending: the
-- long polls' one shared fallback read.
-- name: RequestsSettled :many
SELECT id FROM request_rows WHERE id = ANY(@ids::uuid[]) AND status <> 'pending';
