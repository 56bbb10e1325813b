-- Users, sessions, API tokens, approvals, login throttling and the audit
-- trail (migration 00002). Every administrative write appends its
-- audit_events row in the same statement.

-- name: UserInsert :one
WITH u AS (
    INSERT INTO users (username, password_hash, role, kinds, email)
    VALUES (sqlc.arg(username)::text, sqlc.arg(password_hash)::text, sqlc.arg(role)::text, sqlc.arg(kinds)::text[],
            sqlc.arg(email)::text)
    RETURNING *
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.created', u.username,
           jsonb_build_object('role', u.role, 'kinds', to_jsonb(u.kinds), 'email', u.email)
    FROM u
)
SELECT * FROM u;

-- UserInsertIfMissing creates a user unless one of that name exists (the
-- admin user at start-up, on any number of replicas at once): no row when
-- it existed.
-- name: UserInsertIfMissing :many
WITH u AS (
    INSERT INTO users (username, password_hash, role, kinds)
    VALUES (sqlc.arg(username)::text, sqlc.arg(password_hash)::text, sqlc.arg(role)::text, '{}')
    ON CONFLICT (username) DO NOTHING
    RETURNING id, username, role
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.created', u.username, jsonb_build_object('role', u.role, 'kinds', '[]'::jsonb)
    FROM u
)
SELECT id FROM u;

-- name: UserGetByName :one
SELECT * FROM users WHERE username = @username;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = @id;

-- name: UserList :many
SELECT * FROM users ORDER BY username;

-- UserGetByOIDC finds the user bound to an identity provider's issuer and
-- subject (SPEC §21): never by name.
-- name: UserGetByOIDC :one
SELECT * FROM users WHERE oidc_issuer = sqlc.arg(issuer)::text AND oidc_subject = sqlc.arg(subject)::text;

-- UserInsertOIDC creates the user of a first sign-in with the identity
-- provider: no password, bound to issuer and subject. No row when the name
-- is taken or another sign-in bound the subject first (the caller looks
-- again, then tries the next name).
-- name: UserInsertOIDC :many
WITH u AS (
    INSERT INTO users (username, password_hash, role, kinds, email, oidc_issuer, oidc_subject, idp_groups, last_login_at)
    VALUES (sqlc.arg(username)::text, '', sqlc.arg(role)::text, '{}', sqlc.arg(email)::text, sqlc.arg(issuer)::text,
            sqlc.arg(subject)::text, sqlc.arg(groups)::text[], now())
    ON CONFLICT DO NOTHING
    RETURNING *
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.created', u.username,
           jsonb_build_object('role', u.role, 'kinds', '[]'::jsonb, 'email', u.email, 'issuer', u.oidc_issuer,
                              'sub', u.oidc_subject, 'groups', to_jsonb(u.idp_groups))
    FROM u
)
SELECT * FROM u;

-- UserSetOIDCLogin records a later sign-in with the identity provider: the
-- role its groups map to now (an approver keeps its kinds while it stays
-- one), the groups, the time. A changed role is audited as user.updated.
-- No row: no such user.
-- name: UserSetOIDCLogin :one
WITH old AS (
    SELECT id, role, idp_groups FROM users WHERE id = sqlc.arg(id)::uuid
), u AS (
    UPDATE users SET role = sqlc.arg(role)::text,
                     kinds = CASE WHEN users.role = 'approver' AND sqlc.arg(role)::text = 'approver' THEN users.kinds
                                  ELSE '{}' END,
                     idp_groups = sqlc.arg(groups)::text[], last_login_at = now(),
                     updated_at = CASE WHEN users.role <> sqlc.arg(role)::text THEN now() ELSE users.updated_at END
    WHERE id = sqlc.arg(id)::uuid
    RETURNING *
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.updated', u.username,
           jsonb_build_object('role', u.role, 'was', old.role, 'kinds', to_jsonb(u.kinds), 'groups', to_jsonb(u.idp_groups))
    FROM u JOIN old ON old.id = u.id
    WHERE old.role <> u.role
)
SELECT * FROM u;

-- UserEndOIDCAccess is a sign-in with the identity provider whose groups
-- no longer map to a role: the user keeps the groups the provider sent and
-- every session of theirs ends (audited). No row: no such user.
-- name: UserEndOIDCAccess :one
WITH u AS (
    UPDATE users SET idp_groups = sqlc.arg(groups)::text[], last_login_at = now(), updated_at = now()
    WHERE id = sqlc.arg(id)::uuid
    RETURNING id, username
), s AS (
    UPDATE sessions SET revoked_at = now()
    WHERE user_id IN (SELECT id FROM u) AND revoked_at IS NULL
    RETURNING id, user_id
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'session.revoked', s.id::text,
           jsonb_build_object('user', u.username, 'reason', 'no group of the identity provider maps to a role any more')
    FROM s JOIN u ON u.id = s.user_id
)
SELECT u.username, (SELECT count(*) FROM s)::int AS revoked FROM u;

-- OIDCFlowInsert stores a sign-in under way (SPEC §21).
-- name: OIDCFlowInsert :exec
INSERT INTO oidc_flows (state_hash, nonce, verifier, next, expires_at)
VALUES (@state_hash, @nonce, @verifier, @next, @expires_at);

-- OIDCFlowTake deletes a sign-in's flow and returns it, unless it has
-- expired: a state works once.
-- name: OIDCFlowTake :one
DELETE FROM oidc_flows WHERE state_hash = @state_hash AND expires_at > now()
RETURNING nonce, verifier, next, expires_at;

-- name: OIDCFlowsPrune :execrows
DELETE FROM oidc_flows WHERE expires_at < @before;

-- UserSetDisabled disables or enables a user; disabling revokes its
-- sessions. No row: no such user.
-- name: UserSetDisabled :one
WITH u AS (
    UPDATE users SET disabled = sqlc.arg(disabled)::bool, updated_at = now()
    WHERE username = sqlc.arg(username)::text
    RETURNING id, username, disabled
), s AS (
    UPDATE sessions SET revoked_at = now()
    WHERE user_id IN (SELECT id FROM u WHERE u.disabled) AND revoked_at IS NULL
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, CASE WHEN u.disabled THEN 'user.disabled' ELSE 'user.enabled' END, u.username, '{}'
    FROM u
)
SELECT id FROM u;

-- UserSetRole changes a user's role and kinds. No row: no such user.
-- name: UserSetRole :one
WITH u AS (
    UPDATE users SET role = sqlc.arg(role)::text, kinds = sqlc.arg(kinds)::text[], updated_at = now()
    WHERE username = sqlc.arg(username)::text
    RETURNING id, username, role, kinds
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.updated', u.username,
           jsonb_build_object('role', u.role, 'kinds', to_jsonb(u.kinds))
    FROM u
)
SELECT id FROM u;

-- UserSetPassword replaces a password hash and revokes the user's
-- sessions. No row: no such user.
-- name: UserSetPassword :one
WITH u AS (
    UPDATE users SET password_hash = sqlc.arg(password_hash)::text, updated_at = now()
    WHERE username = sqlc.arg(username)::text
    RETURNING id, username
), s AS (
    UPDATE sessions SET revoked_at = now()
    WHERE user_id IN (SELECT id FROM u) AND revoked_at IS NULL
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'user.password_set', u.username, '{}'
    FROM u
)
SELECT id FROM u;

-- name: SessionInsert :one
WITH s AS (
    INSERT INTO sessions (token_hash, user_id, csrf_secret, user_agent, addr, expires_at)
    VALUES (sqlc.arg(token_hash)::bytea, sqlc.arg(user_id)::uuid, sqlc.arg(csrf_secret)::bytea,
            sqlc.arg(user_agent)::text, sqlc.arg(addr)::text, sqlc.arg(expires_at)::timestamptz)
    RETURNING id, created_at, last_seen_at, expires_at
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT u.username, 'session.created', s.id::text,
           jsonb_build_object('addr', sqlc.arg(addr)::text, 'user_agent', sqlc.arg(user_agent)::text)
    FROM s, users u WHERE u.id = sqlc.arg(user_id)::uuid
)
SELECT id, created_at, last_seen_at, expires_at FROM s;

-- SessionLookup reads a session by the hash of its token, with its user.
-- name: SessionLookup :one
SELECT s.id, s.user_id, s.csrf_secret, s.created_at, s.last_seen_at, s.expires_at, s.revoked_at,
       u.username, u.role, u.kinds, u.disabled, u.idp_groups
FROM sessions s
JOIN users u ON u.id = s.user_id
WHERE s.token_hash = @token_hash;

-- name: SessionTouch :exec
UPDATE sessions SET last_seen_at = now() WHERE id = @id AND revoked_at IS NULL;

-- SessionRevoke ends a session (logout). No row: it was not active.
-- name: SessionRevoke :one
WITH s AS (
    UPDATE sessions SET revoked_at = now()
    WHERE id = sqlc.arg(id)::uuid AND revoked_at IS NULL
    RETURNING id, user_id
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'session.revoked', s.id::text, jsonb_build_object('user', u.username)
    FROM s JOIN users u ON u.id = s.user_id
)
SELECT id FROM s;

-- SessionsPrune deletes sessions that ended before a time.
-- name: SessionsPrune :execrows
DELETE FROM sessions WHERE expires_at < @before OR revoked_at < @before;

-- name: TokenInsert :one
WITH t AS (
    INSERT INTO api_tokens (name, token_hash, role, created_by)
    VALUES (sqlc.arg(name)::text, sqlc.arg(token_hash)::bytea, sqlc.arg(role)::text, sqlc.arg(created_by)::text)
    RETURNING id, name, role, created_by, created_at
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT t.created_by, 'token.created', t.id::text, jsonb_build_object('name', t.name, 'role', t.role)
    FROM t
)
SELECT id, name, role, created_by, created_at FROM t;

-- name: TokenLookup :one
SELECT id, name, role, created_by, created_at, last_used_at, revoked_at FROM api_tokens WHERE token_hash = @token_hash;

-- name: TokenTouch :exec
UPDATE api_tokens SET last_used_at = now() WHERE id = @id;

-- name: TokenList :many
SELECT id, name, role, created_by, created_at, last_used_at, revoked_at FROM api_tokens ORDER BY created_at, id;

-- TokenRevoke revokes a token. No row: no such token, or revoked already.
-- name: TokenRevoke :one
WITH t AS (
    UPDATE api_tokens SET revoked_at = now()
    WHERE id = sqlc.arg(id)::uuid AND revoked_at IS NULL
    RETURNING id, name, role
), a AS (
    INSERT INTO audit_events (actor, kind, subject, data)
    SELECT sqlc.arg(actor)::text, 'token.revoked', t.id::text, jsonb_build_object('name', t.name, 'role', t.role)
    FROM t
)
SELECT id, name FROM t;

-- name: TokenGet :one
SELECT id, name, role, created_by, created_at, last_used_at, revoked_at FROM api_tokens WHERE id = @id;

-- name: LoginAttemptInsert :exec
INSERT INTO login_attempts (username, addr, ok) VALUES (@username, @addr, @ok);

-- LoginFailures counts the failed logins since a time, of a user name and
-- from an address.
-- name: LoginFailures :one
SELECT count(*) FILTER (WHERE username = sqlc.arg(username)::text)::int AS by_user,
       count(*) FILTER (WHERE addr = sqlc.arg(addr)::text)::int AS by_addr,
       COALESCE(min(at) FILTER (WHERE username = sqlc.arg(username)::text), now())::timestamptz AS user_oldest,
       COALESCE(min(at) FILTER (WHERE addr = sqlc.arg(addr)::text), now())::timestamptz AS addr_oldest
FROM login_attempts
WHERE NOT ok AND at > sqlc.arg(since)::timestamptz
  AND (username = sqlc.arg(username)::text OR addr = sqlc.arg(addr)::text);

-- LoginFailuresClear forgets a user name's failed logins (after a success).
-- name: LoginFailuresClear :exec
DELETE FROM login_attempts WHERE username = @username AND NOT ok;

-- name: LoginAttemptsPrune :execrows
DELETE FROM login_attempts WHERE at < @before;

-- name: AuditInsert :exec
INSERT INTO audit_events (actor, kind, subject, data) VALUES (@actor, @kind, @subject, @data);

-- AuditList is the audit trail, newest first: administrative actions from
-- audit_events, and the actions on tasks from task_events, each with its
-- actor. Empty actor or kind: any; a kind matches exactly or as a prefix
-- ("user" matches user.created, user.disabled, …).
-- name: AuditList :many
(SELECT a.at, a.actor, a.kind, a.subject, a.data, NULL::uuid AS task_id, 0::bigint AS seq, a.id AS audit_id
 FROM audit_events a
 WHERE (sqlc.arg(actor)::text = '' OR a.actor = sqlc.arg(actor)::text)
   AND (sqlc.arg(kind)::text = '' OR a.kind = sqlc.arg(kind)::text OR a.kind LIKE sqlc.arg(kind)::text || '.%')
   AND a.at >= sqlc.arg(since)::timestamptz AND a.at < sqlc.arg(until)::timestamptz
 ORDER BY a.at DESC, a.id DESC
 LIMIT sqlc.arg(max_rows)::int)
UNION ALL
(SELECT e.created_at AS at,
        COALESCE(e.data ->> 'actor', e.data ->> 'decided_by', e.data ->> 'approved_by', e.data ->> 'cancelled_by',
                 e.data ->> 'retried_by', e.data ->> 'created_by', '')::text AS actor,
        e.type AS kind, e.task_id::text AS subject, e.data, e.task_id AS task_id, e.seq AS seq, 0::bigint AS audit_id
 FROM task_events e
 WHERE e.type IN ('task.created', 'decision.recorded', 'approval.recorded', 'task.cancelled', 'task.retried',
                  'interrupt.expired', 'interrupt.claimed', 'interrupt.released', 'interrupt.taken_over')
   AND (sqlc.arg(actor)::text = ''
        OR COALESCE(e.data ->> 'actor', e.data ->> 'decided_by', e.data ->> 'approved_by', e.data ->> 'cancelled_by',
                    e.data ->> 'retried_by', e.data ->> 'created_by', '') = sqlc.arg(actor)::text)
   AND (sqlc.arg(kind)::text = '' OR e.type = sqlc.arg(kind)::text OR e.type LIKE sqlc.arg(kind)::text || '.%')
   AND e.created_at >= sqlc.arg(since)::timestamptz AND e.created_at < sqlc.arg(until)::timestamptz
 ORDER BY e.created_at DESC
 LIMIT sqlc.arg(max_rows)::int)
ORDER BY at DESC, audit_id DESC, seq DESC
LIMIT sqlc.arg(max_rows)::int;

-- InterruptLock reads an interrupt and locks it until the transaction ends
-- (approvals are counted under this lock).
-- name: InterruptLock :one
SELECT * FROM interrupts WHERE id = @id FOR UPDATE;

-- name: ApprovalInsert :execrows
INSERT INTO approvals (interrupt_id, task_id, approver) VALUES (@interrupt_id, @task_id, @approver)
ON CONFLICT DO NOTHING;

-- name: ApprovalList :many
SELECT * FROM approvals WHERE interrupt_id = @interrupt_id ORDER BY approved_at, approver;

-- name: ApprovalListByTask :many
SELECT * FROM approvals WHERE task_id = @task_id ORDER BY approved_at, approver;

-- TaskAppendEvent appends one event to a task outside a node run (an
-- approval short of the decision).
-- name: TaskAppendEvent :one
WITH t AS (
    UPDATE tasks SET updated_at = now()
    WHERE id = sqlc.arg(task_id)::uuid
    RETURNING id
), s AS (
    INSERT INTO workflow_checkpoints AS c (task_id, state, event_seq) SELECT t.id, '{}', 1 FROM t
    ON CONFLICT (task_id) DO UPDATE SET event_seq = c.event_seq + 1
    RETURNING c.event_seq
)
INSERT INTO task_events (task_id, seq, type, node, iteration, data, created_at)
SELECT sqlc.arg(task_id)::uuid, s.event_seq, sqlc.arg(type)::text, sqlc.arg(node)::text, sqlc.arg(iteration)::int,
       sqlc.arg(data)::jsonb, now()
FROM s
RETURNING seq;
