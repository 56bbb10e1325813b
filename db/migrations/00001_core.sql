-- +goose Up
-- The core tables of SPEC §5. workflow_checkpoints keeps seed 001's columns
-- as prescribed (id, task_id unique, state, last_node_id, updated_at) and adds
-- the engine's position (step, next node, iteration counters, answers, pending
-- interrupt) beside them, so that a checkpoint alone resumes a task.

CREATE TABLE tasks (
    id               uuid PRIMARY KEY,
    workflow         text        NOT NULL,
    title            text        NOT NULL DEFAULT '',
    input            jsonb       NOT NULL DEFAULT '{}',
    options          jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
    current_node     text        NOT NULL DEFAULT '',
    result           jsonb,
    error            text        NOT NULL DEFAULT '',
    -- last seq handed out in task_events; bumped in the same transaction as the insert
    event_seq        bigint      NOT NULL DEFAULT 0,
    -- lease (SPEC §4): every checkpoint write checks lease_fence
    lease_owner      text,
    lease_expires_at timestamptz,
    lease_fence      bigint      NOT NULL DEFAULT 0,
    -- the replica that claimed the task last (kept after the lease ends)
    last_owner       text        NOT NULL DEFAULT '',
    created_by       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz
) WITH (fillfactor = 70);

CREATE INDEX tasks_created_idx ON tasks (created_at DESC, id DESC);
CREATE INDEX tasks_status_created_idx ON tasks (status, created_at DESC, id DESC);
CREATE INDEX tasks_workflow_created_idx ON tasks (workflow, created_at DESC, id DESC);
-- Nothing per-step (updated_at, current_node, event_seq) is indexed, so a
-- node run's update of its task row stays HOT.

CREATE TABLE workflow_checkpoints (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    task_id              uuid        NOT NULL UNIQUE REFERENCES tasks (id) ON DELETE CASCADE,
    state                jsonb       NOT NULL,
    last_node_id         text        NOT NULL DEFAULT '',
    updated_at           timestamptz NOT NULL DEFAULT now(),
    step                 integer     NOT NULL DEFAULT 0,
    next_node_id         text        NOT NULL DEFAULT '',
    iterations           jsonb       NOT NULL DEFAULT '{}',
    answers              jsonb       NOT NULL DEFAULT '[]',
    pending_interrupt_id uuid
) WITH (fillfactor = 70);

-- checkpoint_history and task_events take a row per node run. They carry no
-- foreign key: their rows are only ever written by the statement that
-- updates the task row itself, and a key check per row was a measurable
-- share of a step's cost.
CREATE TABLE checkpoint_history (
    task_id              uuid        NOT NULL,
    step                 integer     NOT NULL,
    -- what produced this checkpoint: start, node, interrupt, decision
    reason               text        NOT NULL,
    last_node_id         text        NOT NULL DEFAULT '',
    next_node_id         text        NOT NULL DEFAULT '',
    state                jsonb       NOT NULL,
    iterations           jsonb       NOT NULL DEFAULT '{}',
    answers              jsonb       NOT NULL DEFAULT '[]',
    pending_interrupt_id uuid,
    created_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step)
);

CREATE TABLE interrupts (
    id          uuid PRIMARY KEY,
    task_id     uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    node        text        NOT NULL,
    kind        text        NOT NULL,
    iteration   integer     NOT NULL,
    payload     jsonb       NOT NULL,
    status      text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'resolved', 'cancelled')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);

-- At most one pending interrupt per task: a second one is a bug, not a state.
CREATE UNIQUE INDEX interrupts_one_pending_idx ON interrupts (task_id) WHERE status = 'pending';
CREATE INDEX interrupts_pending_idx ON interrupts (created_at, id) WHERE status = 'pending';
CREATE INDEX interrupts_task_idx ON interrupts (task_id, created_at);

CREATE TABLE decisions (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    interrupt_id uuid        NOT NULL UNIQUE REFERENCES interrupts (id) ON DELETE CASCADE,
    task_id      uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    action       text        NOT NULL CHECK (action IN ('approve', 'reject', 'edit', 'respond')),
    feedback     text        NOT NULL DEFAULT '',
    value        jsonb,
    decided_by   text        NOT NULL DEFAULT '',
    decided_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX decisions_task_idx ON decisions (task_id, decided_at);

CREATE TABLE task_events (
    task_id     uuid        NOT NULL,
    seq         bigint      NOT NULL,
    type        text        NOT NULL,
    node        text        NOT NULL DEFAULT '',
    iteration   integer     NOT NULL DEFAULT 0,
    phase       text        NOT NULL DEFAULT '',
    duration_ms bigint,
    data        jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE artifacts (
    task_id      uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    version      integer     NOT NULL,
    node         text        NOT NULL DEFAULT '',
    iteration    integer     NOT NULL DEFAULT 0,
    content_type text        NOT NULL DEFAULT 'text/plain',
    content      text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, name, version)
);

-- gatehouse_lease_lost raises SQLSTATE GH409 (or GH404 for a task that
-- does not exist). A commit calls it only when its fenced UPDATE of the task
-- matched no row, so the error aborts the whole implicit transaction of the
-- batch and a worker that lost its lease writes nothing.
-- +goose StatementBegin
CREATE FUNCTION gatehouse_lease_lost(p_task uuid, p_fence bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_fence bigint;
BEGIN
    SELECT lease_fence INTO v_fence FROM tasks WHERE id = p_task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % does not exist', p_task USING ERRCODE = 'GH404';
    END IF;
    RAISE EXCEPTION 'lease of task % lost: fence is %, writer holds %', p_task, v_fence, p_fence
        USING ERRCODE = 'GH409';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION gatehouse_lease_lost(uuid, bigint);
DROP TABLE artifacts;
DROP TABLE task_events;
DROP TABLE decisions;
DROP TABLE interrupts;
DROP TABLE checkpoint_history;
DROP TABLE workflow_checkpoints;
DROP TABLE tasks;
