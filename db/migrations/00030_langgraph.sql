-- +goose Up
-- The LangGraph Agent Server API (SPEC §14). A thread is a task and its
-- metadata: the task started by a thread's first run takes the thread's id,
-- and a task started elsewhere (the desk, the API) is a thread too, without
-- a row here. A run is one stretch of the task through /langgraph: the task
-- events after after_seq up to the first that made it wait, end or fail.

CREATE TABLE lg_threads (
    id         uuid PRIMARY KEY,
    metadata   jsonb       NOT NULL DEFAULT '{}',
    created_by text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX lg_threads_created_idx ON lg_threads (created_at DESC, id DESC);
CREATE INDEX lg_threads_metadata_idx ON lg_threads USING gin (metadata jsonb_path_ops);

CREATE TABLE lg_runs (
    id                 uuid PRIMARY KEY,
    thread_id          uuid        NOT NULL REFERENCES lg_threads (id) ON DELETE CASCADE,
    assistant_id       uuid        NOT NULL,
    -- pending and running are told apart by the task's status when read;
    -- the others are settled from the event that ended the run.
    status             text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout', 'interrupted')),
    after_seq          bigint      NOT NULL,
    end_seq            bigint,
    -- the checkpoint step the task stood at when the run began
    start_step         integer     NOT NULL DEFAULT 0,
    metadata           jsonb       NOT NULL DEFAULT '{}',
    kwargs             jsonb       NOT NULL DEFAULT '{}',
    multitask_strategy text        NOT NULL DEFAULT 'reject',
    created_by         text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX lg_runs_thread_idx ON lg_runs (thread_id, created_at DESC, id DESC);
-- One run at a time per thread: a second insert while one is active fails.
CREATE UNIQUE INDEX lg_runs_one_active_idx ON lg_runs (thread_id) WHERE status IN ('pending', 'running');

-- +goose Down
DROP TABLE lg_runs;
DROP TABLE lg_threads;
