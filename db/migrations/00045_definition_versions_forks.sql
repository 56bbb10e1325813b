-- +goose Up
-- Definition versions and forks (SPEC §15). Every task records the version
-- of its workflow's definition it was created under (a hash of nodes,
-- edges, gates and the state version; '' for tasks older than versions),
-- and a fork the checkpoint it started from. Neither changes after the
-- task's first commit, so a node run's update of the task row stays HOT.
ALTER TABLE tasks
    ADD COLUMN definition_version text NOT NULL DEFAULT '',
    ADD COLUMN forked_from_task   uuid REFERENCES tasks (id) ON DELETE SET NULL,
    ADD COLUMN forked_from_step   integer;

-- The forks of a task (its page links to them); only forks enter it.
CREATE INDEX tasks_forked_from_idx ON tasks (forked_from_task, created_at) WHERE forked_from_task IS NOT NULL;

-- +goose Down
DROP INDEX tasks_forked_from_idx;
ALTER TABLE tasks
    DROP COLUMN forked_from_step,
    DROP COLUMN forked_from_task,
    DROP COLUMN definition_version;
