-- +goose Up
-- Every delivery to an endpoint checked its foreign key by share-locking
-- the endpoint's row: all concurrent events locked the same row, which
-- PostgreSQL records as a multixact, and each event's transaction paid for
-- it (the outbox insert took 10× its time). Removing an endpoint deletes
-- its deliveries itself (WebhookDelete); a delivery written while its
-- endpoint was removed finds it gone and fails as such.
ALTER TABLE outbox DROP CONSTRAINT outbox_endpoint_id_fkey;

-- +goose Down
DELETE FROM outbox o WHERE endpoint_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = o.endpoint_id);
ALTER TABLE outbox ADD CONSTRAINT outbox_endpoint_id_fkey
    FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
