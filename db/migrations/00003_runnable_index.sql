-- +goose Up
-- Claims look for runnable tasks oldest first. Through tasks_created_idx
-- that walk passed every finished task older than the oldest queued one, so
-- a claim grew with the history; this index holds only the tasks a claim
-- may take (queued, and running ones whose lease may have expired).
CREATE INDEX tasks_runnable_idx ON tasks (created_at, id) WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX tasks_runnable_idx;
