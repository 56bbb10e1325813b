-- +goose Up
-- Retention of notification rows (serve with GATEHOUSE_OUTBOX_RETENTION):
-- the hourly prune finds the old finished deliveries and the old ended
-- action links through these, instead of reading the whole tables. Only
-- finished deliveries are indexed: a row enters the index once, when its
-- sender records it delivered or failed (that update is not HOT anyway:
-- state is in outbox_due_idx's predicate); inserts and claims of pending
-- rows never touch it.
CREATE INDEX outbox_finished_idx ON outbox (created_at) WHERE state <> 'pending';
-- A link ends when it is used, else at its expiry.
CREATE INDEX action_links_ended_idx ON action_links ((COALESCE(used_at, expires_at)));
-- Deleting a delivery sets its links' outbox_id to NULL (the foreign key
-- of 00020): without an index, each deleted delivery read action_links
-- whole.
CREATE INDEX action_links_outbox_idx ON action_links (outbox_id) WHERE outbox_id IS NOT NULL;

-- +goose Down
DROP INDEX action_links_outbox_idx;
DROP INDEX action_links_ended_idx;
DROP INDEX outbox_finished_idx;
