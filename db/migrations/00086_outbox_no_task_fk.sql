-- +goose Up
-- Each delivery written share-locked its task's row for the foreign key
-- (a WAL record and a trigger per row), kept an index on task_id that
-- nothing reads but that cascade, and each attempt logged share-locked its
-- delivery's row the same way: a third of the WAL a delivery cost besides
-- its rows. Tasks are not deleted by Gatehouse (retention prunes history,
-- not tasks); a delivery whose task an operator deleted finds it gone and
-- fails as such, and the retention prune takes it. Attempts are deleted
-- with their deliveries by the statements that delete those (the prune,
-- WebhookDelete).
ALTER TABLE outbox DROP CONSTRAINT outbox_task_id_fkey;
DROP INDEX outbox_task_idx;
ALTER TABLE outbox_attempts DROP CONSTRAINT outbox_attempts_outbox_id_fkey;

-- +goose Down
DELETE FROM outbox_attempts a WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = a.outbox_id);
ALTER TABLE outbox_attempts ADD CONSTRAINT outbox_attempts_outbox_id_fkey
    FOREIGN KEY (outbox_id) REFERENCES outbox (id) ON DELETE CASCADE;
DELETE FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = o.task_id);
CREATE INDEX outbox_task_idx ON outbox (task_id);
ALTER TABLE outbox ADD CONSTRAINT outbox_task_id_fkey
    FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
