-- +goose Up
-- Decisions in time (SPEC §11): interrupts gain a deadline, an overdue
-- mark, an escalation level, a claim and the hash of their payload; a
-- decision keeps the hash its decider saw. Deadlines, reminders and
-- escalation steps are rows of interrupt_timers, written with the
-- interrupt and deleted by the transaction that fires them (exactly once,
-- on whichever replica claims them first; SKIP LOCKED lets replicas share
-- a burst).

ALTER TABLE interrupts DROP CONSTRAINT interrupts_status_check;
ALTER TABLE interrupts ADD CONSTRAINT interrupts_status_check
    CHECK (status IN ('pending', 'resolved', 'cancelled', 'expired'));
ALTER TABLE interrupts
    ADD COLUMN deadline_at      timestamptz,
    ADD COLUMN overdue          boolean NOT NULL DEFAULT false,
    ADD COLUMN escalation_level integer NOT NULL DEFAULT 0,
    ADD COLUMN claimed_by       text,
    ADD COLUMN claim_expires_at timestamptz,
    ADD COLUMN payload_sha256   text    NOT NULL DEFAULT ''
        CHECK (payload_sha256 = '' OR payload_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE decisions ADD COLUMN payload_sha256 text NOT NULL DEFAULT '';


CREATE TABLE interrupt_timers (
    interrupt_id uuid        NOT NULL REFERENCES interrupts (id) ON DELETE CASCADE,
    task_id      uuid        NOT NULL,
    -- deadline (step 0), reminder (step = its place in the list, from 1),
    -- escalate (step = the level it reaches, from 1)
    what         text        NOT NULL CHECK (what IN ('deadline', 'reminder', 'escalate')),
    step         integer     NOT NULL DEFAULT 0,
    due_at       timestamptz NOT NULL,
    -- what the deadline does (fail, approve, cancel, none), fixed at the
    -- raise; for a reminder its offset before the deadline, in seconds
    action       text        NOT NULL DEFAULT '',
    offset_s     float8      NOT NULL DEFAULT 0,
    PRIMARY KEY (interrupt_id, what, step)
);

CREATE INDEX interrupt_timers_due_idx ON interrupt_timers (due_at);

-- The inbox is a work queue: pending interrupts by deadline (none last),
-- then age; its keyset walks this index without a sort.
CREATE INDEX interrupts_pending_due_idx ON interrupts ((COALESCE(deadline_at, 'infinity'::timestamptz)), created_at, id)
    WHERE status = 'pending';

-- The audit trail reads the claims and expiries too.
DROP INDEX task_events_audit_idx;
CREATE INDEX task_events_audit_idx ON task_events (created_at DESC)
    WHERE type IN ('task.created', 'decision.recorded', 'approval.recorded', 'task.cancelled', 'task.retried',
                   'interrupt.expired', 'interrupt.claimed', 'interrupt.released', 'interrupt.taken_over');

-- +goose Down
DROP INDEX task_events_audit_idx;
CREATE INDEX task_events_audit_idx ON task_events (created_at DESC)
    WHERE type IN ('task.created', 'decision.recorded', 'approval.recorded', 'task.cancelled', 'task.retried');
DROP INDEX interrupts_pending_due_idx;
DROP TABLE interrupt_timers;
ALTER TABLE decisions DROP COLUMN payload_sha256;
ALTER TABLE interrupts
    DROP COLUMN deadline_at, DROP COLUMN overdue, DROP COLUMN escalation_level,
    DROP COLUMN claimed_by, DROP COLUMN claim_expires_at, DROP COLUMN payload_sha256;
UPDATE interrupts SET status = 'cancelled' WHERE status = 'expired';
ALTER TABLE interrupts DROP CONSTRAINT interrupts_status_check;
ALTER TABLE interrupts ADD CONSTRAINT interrupts_status_check
    CHECK (status IN ('pending', 'resolved', 'cancelled'));
