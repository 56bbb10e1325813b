-- +goose Up
-- Who may decide (issue 6): users with cumulative roles, browser sessions,
-- API tokens, the approvals of interrupts that need several approvers,
-- login attempts for throttling, and the audit trail of administrative
-- actions. Secrets are never stored: sessions and tokens are looked up by
-- the SHA-256 of their random value, passwords are argon2id hashes.

CREATE TABLE users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- lower case; "bootstrap" and names with ':' belong to other principals
    username      text        NOT NULL UNIQUE
        CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,62}$' AND username <> 'bootstrap'),
    password_hash text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('viewer', 'operator', 'approver', 'admin')),
    -- interrupt kinds an approver may decide; empty: every kind
    kinds         text[]      NOT NULL DEFAULT '{}',
    disabled      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    token_hash   bytea       NOT NULL UNIQUE,
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- the key of the session's CSRF tokens (HMAC)
    csrf_secret  bytea       NOT NULL,
    user_agent   text        NOT NULL DEFAULT '',
    addr         text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    -- the absolute expiry; the idle one is last_seen_at + the idle timeout
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);

CREATE INDEX sessions_user_idx ON sessions (user_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name         text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    token_hash   bytea       NOT NULL UNIQUE,
    role         text        NOT NULL CHECK (role IN ('viewer', 'operator', 'approver', 'admin')),
    created_by   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- approvals of an interrupt whose kind needs several distinct approvers;
-- the decision itself is recorded once enough of them approved.
CREATE TABLE approvals (
    interrupt_id uuid        NOT NULL REFERENCES interrupts (id) ON DELETE CASCADE,
    task_id      uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    approver     text        NOT NULL,
    approved_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (interrupt_id, approver)
);

CREATE INDEX approvals_task_idx ON approvals (task_id, approved_at);

CREATE TABLE login_attempts (
    id       bigserial PRIMARY KEY,
    username text        NOT NULL,
    addr     text        NOT NULL,
    ok       boolean     NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX login_attempts_user_idx ON login_attempts (username, at) WHERE NOT ok;
CREATE INDEX login_attempts_addr_idx ON login_attempts (addr, at) WHERE NOT ok;
CREATE INDEX login_attempts_at_idx ON login_attempts (at);

-- administrative actions (users, tokens, sessions, refused decisions). The
-- actions on tasks (created, decided, approved, cancelled, retried) are
-- task_events carrying their actor; the audit query reads both.
CREATE TABLE audit_events (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    kind    text        NOT NULL,
    subject text        NOT NULL DEFAULT '',
    data    jsonb       NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_events_at_idx ON audit_events (at DESC, id DESC);
CREATE INDEX audit_events_actor_idx ON audit_events (actor, at DESC);

-- The task events of the audit trail, by time: only these rows enter the
-- index, so the write path of node runs is untouched.
CREATE INDEX task_events_audit_idx ON task_events (created_at DESC)
    WHERE type IN ('task.created', 'decision.recorded', 'approval.recorded', 'task.cancelled', 'task.retried');

-- +goose Down
DROP INDEX task_events_audit_idx;
DROP TABLE audit_events;
DROP TABLE login_attempts;
DROP TABLE approvals;
DROP TABLE api_tokens;
DROP TABLE sessions;
DROP TABLE users;
