-- +goose Up
-- A node run that leaves its task running no longer updates the task's
-- row (scripts/step-cost.sh): the per-task event counter moves to the
-- checkpoint row, which every commit writes anyway, and the fence stays on
-- the task row, checked under a share lock (a claim's SKIP LOCKED passes
-- the row by, a cancel or a decision waits for the commit). The task row is
-- written when the task changes status, ends, or has not been written for
-- a second (its current_node and updated_at lag a running task by at most
-- that).
ALTER TABLE workflow_checkpoints ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
UPDATE workflow_checkpoints c SET event_seq = t.event_seq FROM tasks t WHERE t.id = c.task_id AND t.event_seq <> 0;
ALTER TABLE tasks DROP COLUMN event_seq;

-- +goose Down
ALTER TABLE tasks ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
UPDATE tasks t SET event_seq = c.event_seq FROM workflow_checkpoints c WHERE c.task_id = t.id AND c.event_seq <> 0;
ALTER TABLE workflow_checkpoints DROP COLUMN event_seq;
