-- +goose Up
-- Who has a task page open (SPEC §11 presence), across replicas: each open
-- page's socket keeps a row fresh every few seconds and deletes it when it
-- closes; a row not refreshed for 15 s (its replica died) no longer
-- counts. Unlogged: presence is worth nothing after a crash, and its
-- writes should cost no WAL.
CREATE UNLOGGED TABLE presence (
    task_id  uuid        NOT NULL,
    -- one open page (a random id per socket)
    viewer   text        NOT NULL,
    username text        NOT NULL,
    seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, viewer)
);

CREATE INDEX presence_seen_idx ON presence (seen_at);

-- +goose Down
DROP TABLE presence;
