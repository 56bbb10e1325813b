-- RequestReserve writes a request's row, unless the principal used its
-- idempotency key already (no row then: read that one with RequestByKey).
-- name: RequestReserve :one
INSERT INTO requests (id, created_by, idempotency_key, body_sha256, kind, body, callback_url, callback_secret, via)
VALUES (@id::uuid, @created_by::text, sqlc.narg(idempotency_key)::text, @body_sha256::text, @kind::text, @body::jsonb,
        @callback_url::text, @callback_secret::text, @via::text)
ON CONFLICT (created_by, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

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
-- created (the process stopped between the two writes).
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
