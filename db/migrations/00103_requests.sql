-- +goose Up
-- Approval requests (SPEC §16): an agent asks a person through the API or
-- MCP. Each request is a task of the built-in one-node workflow `request`
-- with the same id; this row is what the task does not hold: who asked
-- with which idempotency key (and the hash of the body, to tell a repeat
-- from a reuse), the callback and its signing secret, and the request as
-- created. The row is written first, in its own transaction, so that
-- concurrent repeats of one key meet at its unique index; the task comes
-- second (a row without its task is completed by the next repeat, or at
-- start).
CREATE TABLE requests (
    id              uuid PRIMARY KEY,
    created_by      text        NOT NULL,
    idempotency_key text,
    body_sha256     text        NOT NULL,
    kind            text        NOT NULL,
    -- the normalized request: title, description, payload, actions,
    -- response_schema, metadata, deadline
    body            jsonb       NOT NULL,
    callback_url    text        NOT NULL DEFAULT '',
    -- whsec_<base64 of 32 bytes>: signing needs the key itself (as for
    -- webhook endpoints)
    callback_secret text        NOT NULL DEFAULT '',
    via             text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX requests_idempotency_idx ON requests (created_by, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX requests_created_idx ON requests (created_at DESC, id DESC);
CREATE INDEX requests_kind_idx ON requests (kind, created_at DESC, id DESC);

-- A request with where its task stands: its interrupt (the latest), the
-- interrupt's decision and the request's status (SPEC §16), computed here
-- once for reads and filters alike.
CREATE VIEW request_rows AS
SELECT r.id, r.created_by, r.idempotency_key, r.kind, r.body, r.callback_url, r.via, r.created_at,
       COALESCE(t.status, '')::text AS task_status, COALESCE(i.id::text, '')::text AS interrupt_id,
       COALESCE(i.status, '')::text AS interrupt_status, i.deadline_at AS deadline_at,
       COALESCE(i.payload_sha256, '')::text AS payload_sha256, i.resolved_at AS resolved_at,
       COALESCE(d.action, '')::text AS d_action, COALESCE(d.feedback, '')::text AS d_feedback, d.value AS d_value,
       COALESCE(d.decided_by, '')::text AS d_decided_by, d.decided_at AS d_decided_at,
       (CASE
           WHEN i.status = 'resolved' THEN CASE d.action WHEN 'approve' THEN 'approved' WHEN 'reject' THEN 'rejected'
                                                         WHEN 'edit' THEN 'edited' ELSE 'responded' END
           WHEN i.status IN ('expired', 'cancelled') THEN i.status
           WHEN i.status IS NULL AND t.status IN ('cancelled', 'failed') THEN 'cancelled'
           ELSE 'pending'
       END)::text AS status
FROM requests r
LEFT JOIN tasks t ON t.id = r.id
LEFT JOIN LATERAL (SELECT * FROM interrupts WHERE task_id = r.id ORDER BY created_at DESC LIMIT 1) i ON true
LEFT JOIN decisions d ON d.interrupt_id = i.id;

-- A request's callback is one more channel of the outbox.
ALTER TABLE outbox DROP CONSTRAINT outbox_channel_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_channel_check CHECK (channel IN ('email', 'webhook', 'slack', 'callback'));

-- When a request's interrupt leaves pending (decided, expired, cancelled;
-- or raised already decided by a rule of the policy), its callback is
-- written to the outbox in the same transaction, whichever statement did
-- it: the decision, the deadline, the cancel. The body is built when it is
-- first sent, from the request as it then is.
-- +goose StatementBegin
CREATE FUNCTION requests_callback() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (event, task_id, interrupt_id, channel, recipient)
    SELECT CASE NEW.status WHEN 'expired' THEN 'request.expired'
                           WHEN 'cancelled' THEN 'request.cancelled'
                           ELSE 'request.decided' END,
           NEW.task_id, NEW.id, 'callback', r.callback_url
    FROM requests r
    WHERE r.id = NEW.task_id AND r.callback_url <> '';
    IF FOUND THEN
        PERFORM pg_notify('gatehouse_outbox', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER requests_callback_settled AFTER UPDATE OF status ON interrupts FOR EACH ROW
    WHEN (OLD.status = 'pending' AND NEW.status <> 'pending') EXECUTE FUNCTION requests_callback();
CREATE TRIGGER requests_callback_ruled AFTER INSERT ON interrupts FOR EACH ROW
    WHEN (NEW.status <> 'pending') EXECUTE FUNCTION requests_callback();

-- +goose Down
DROP TRIGGER requests_callback_ruled ON interrupts;
DROP TRIGGER requests_callback_settled ON interrupts;
DROP FUNCTION requests_callback();
DELETE FROM outbox WHERE channel = 'callback';
ALTER TABLE outbox DROP CONSTRAINT outbox_channel_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_channel_check CHECK (channel IN ('email', 'webhook', 'slack'));
DROP VIEW request_rows;
DROP TABLE requests;
