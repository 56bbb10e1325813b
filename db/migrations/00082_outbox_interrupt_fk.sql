-- +goose Up
-- Interrupts are deleted only with their task, whose deletion already
-- takes the task's deliveries (outbox.task_id cascades): the foreign key
-- to interrupts only cost every delivery written a lookup and a share lock.
ALTER TABLE outbox DROP CONSTRAINT outbox_interrupt_id_fkey;

-- +goose Down
DELETE FROM outbox o WHERE interrupt_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM interrupts i WHERE i.id = o.interrupt_id);
ALTER TABLE outbox ADD CONSTRAINT outbox_interrupt_id_fkey
    FOREIGN KEY (interrupt_id) REFERENCES interrupts (id) ON DELETE CASCADE;
