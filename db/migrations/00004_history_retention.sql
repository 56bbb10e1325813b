-- +goose Up
-- The retention of checkpoint_history (gatehouse prune, and serve with
-- GATEHOUSE_HISTORY_RETENTION) walks the tasks that ended in a time range;
-- the hourly prune only those that ended since its last run, instead of
-- every task that ever ended. Only the transitions into and out of an ended
-- status change completed_at: a node run leaves it NULL, so its update of
-- the task row stays HOT.
CREATE INDEX tasks_completed_idx ON tasks (completed_at, id) WHERE completed_at IS NOT NULL;

-- +goose Down
DROP INDEX tasks_completed_idx;
