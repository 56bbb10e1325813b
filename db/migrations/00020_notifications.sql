-- +goose Up
-- Notifications (SPEC §12): users' email addresses and Slack ids, webhook
-- endpoints, the outbox of deliveries with its log, and the action links
-- of emails.

ALTER TABLE users
    ADD COLUMN email    text NOT NULL DEFAULT '',
    ADD COLUMN slack_id text NOT NULL DEFAULT '';

-- A Slack user maps to one Gatehouse user.
CREATE UNIQUE INDEX users_slack_idx ON users (slack_id) WHERE slack_id <> '';

CREATE TABLE webhook_endpoints (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    url             text        NOT NULL,
    -- whsec_<base64 of 32 bytes>: signing needs the key itself, so it is
    -- stored as it is (unlike tokens, which are only ever compared).
    secret          text        NOT NULL,
    -- event types delivered; empty: every type
    events          text[]      NOT NULL DEFAULT '{}',
    created_by      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- set when the receiver answered 410 Gone (or an admin removed it)
    disabled_at     timestamptz,
    disabled_reason text        NOT NULL DEFAULT ''
);

-- The outbox: one row per (recipient or endpoint, event), inserted in the
-- transaction that commits the event. Senders on any replica claim due rows
-- with SKIP LOCKED; a claim pushes next_at past the longest delivery, so a
-- sender that dies mid-delivery leaves the row due again (at least once).
-- The row's id is the delivery's stable id: webhook-id, Message-ID.
CREATE TABLE outbox (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event        text        NOT NULL,
    task_id      uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    interrupt_id uuid        REFERENCES interrupts (id) ON DELETE CASCADE,
    -- the task event that caused it
    seq          bigint      NOT NULL DEFAULT 0,
    channel      text        NOT NULL CHECK (channel IN ('email', 'webhook', 'slack')),
    endpoint_id  uuid        REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- email: the user name of the recipient
    recipient    text        NOT NULL DEFAULT '',
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts     integer     NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL DEFAULT now(),
    -- a webhook's body as its first attempt built it: every retry sends it
    payload      jsonb,
    last_error   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);

CREATE INDEX outbox_due_idx ON outbox (next_at) WHERE state = 'pending';
CREATE INDEX outbox_endpoint_idx ON outbox (endpoint_id, created_at DESC) WHERE endpoint_id IS NOT NULL;
CREATE INDEX outbox_task_idx ON outbox (task_id);

-- One row per delivery attempt: the delivery log.
CREATE TABLE outbox_attempts (
    outbox_id   uuid        NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    duration_ms bigint      NOT NULL DEFAULT 0,
    -- HTTP status (0: none, e.g. a timeout or an SMTP delivery)
    status_code integer     NOT NULL DEFAULT 0,
    ok          boolean     NOT NULL,
    error       text        NOT NULL DEFAULT '',
    PRIMARY KEY (outbox_id, attempt)
);

-- Action links of emails: the token is 256 random bits, kept only as its
-- SHA-256, bound to one interrupt and one recipient.
CREATE TABLE action_links (
    token_hash   bytea PRIMARY KEY,
    interrupt_id uuid        NOT NULL REFERENCES interrupts (id) ON DELETE CASCADE,
    task_id      uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    recipient    text        NOT NULL,
    outbox_id    uuid        REFERENCES outbox (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);

CREATE INDEX action_links_interrupt_idx ON action_links (interrupt_id, recipient);

-- +goose Down
DROP TABLE action_links;
DROP TABLE outbox_attempts;
DROP TABLE outbox;
DROP TABLE webhook_endpoints;
DROP INDEX users_slack_idx;
ALTER TABLE users DROP COLUMN slack_id, DROP COLUMN email;
