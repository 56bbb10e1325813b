-- Claims on interrupts (SPEC §11): compare-and-swap on the interrupt row.
-- A claim succeeds when the interrupt is pending and nobody else holds an
-- unexpired claim (or take_over is set); the row lock makes concurrent
-- claims take turns, so exactly one of them finds it free.

-- name: InterruptClaim :one
WITH old AS (
    SELECT id, CASE WHEN claim_expires_at > now() THEN claimed_by END AS holder
    FROM interrupts WHERE id = sqlc.arg(id)::uuid FOR UPDATE
)
UPDATE interrupts i
SET claimed_by = sqlc.arg(who)::text, claim_expires_at = now() + sqlc.arg(ttl_seconds)::float8 * interval '1 second'
FROM old
WHERE i.id = old.id AND i.status = 'pending'
  AND (old.holder IS NULL OR old.holder = sqlc.arg(who)::text OR sqlc.arg(take_over)::bool)
RETURNING i.id, i.task_id, i.node, i.kind, i.iteration, i.claim_expires_at, COALESCE(old.holder, '')::text AS previous;

-- name: InterruptRelease :one
WITH old AS (
    SELECT id, CASE WHEN claim_expires_at > now() THEN claimed_by END AS holder
    FROM interrupts WHERE id = sqlc.arg(id)::uuid FOR UPDATE
)
UPDATE interrupts i
SET claimed_by = NULL, claim_expires_at = NULL
FROM old
WHERE i.id = old.id AND i.status = 'pending' AND old.holder IS NOT NULL
  AND (old.holder = sqlc.arg(who)::text OR sqlc.arg(admin)::bool)
RETURNING i.id, i.task_id, i.node, i.kind, i.iteration, old.holder::text AS previous;

-- ClaimsRenew extends the unexpired claims a user holds on a task's
-- pending interrupt (their page of the task is open).
-- name: ClaimsRenew :execrows
UPDATE interrupts
SET claim_expires_at = now() + sqlc.arg(ttl_seconds)::float8 * interval '1 second'
WHERE task_id = sqlc.arg(task_id)::uuid AND status = 'pending' AND claimed_by = sqlc.arg(who)::text AND claim_expires_at > now();
