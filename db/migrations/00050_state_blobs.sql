-- +goose Up
-- Large states (issue 13). A checkpoint rewrote its whole state twice per
-- node run (the current row and its history copy), so a 256 KB document
-- that no node touched cost ~512 KB of WAL per step. Now each top-level
-- field of the state whose JSON is large lives once per task in
-- state_blobs, addressed by the SHA-256 of its bytes, and a checkpoint
-- keeps in `state` the small fields and in `state_refs` the large ones'
-- addresses ({"field": "<hex sha256>"}). A field that did not change is
-- not written again; the current row and the history row carry only its
-- 64-character address.
--
-- The state of a checkpoint is `state` with the fields of `state_refs`
-- added from state_blobs (a field in both: `state` wins, so a row written
-- whole, as every row before this migration was, reads as it always did).
-- Readers rebuild it in the same query as the row: one round trip.
--
-- state_blobs.value is the field's JSON as text, not jsonb: a blob is
-- written and read whole, never queried inside, and text spares
-- PostgreSQL a parse of the document on every write and a re-encoding on
-- every read. No foreign key, as for checkpoint_history: its rows are
-- written only with a fenced commit of the task, and the prune deletes
-- those no checkpoint of an ended task names any more.
CREATE TABLE state_blobs (
    task_id    uuid        NOT NULL,
    hash       bytea       NOT NULL,
    value      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, hash)
);

ALTER TABLE workflow_checkpoints ADD COLUMN state_refs jsonb NOT NULL DEFAULT '{}';
ALTER TABLE checkpoint_history ADD COLUMN state_refs jsonb NOT NULL DEFAULT '{}';

-- +goose Down
-- Put every field back into `state` before the blobs go.
UPDATE workflow_checkpoints c
SET state = (SELECT jsonb_object_agg(r.key, b.value::jsonb)
                        FROM jsonb_each_text(c.state_refs) r
                        JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')) || c.state
WHERE c.state_refs <> '{}';
UPDATE checkpoint_history c
SET state = (SELECT jsonb_object_agg(r.key, b.value::jsonb)
                        FROM jsonb_each_text(c.state_refs) r
                        JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')) || c.state
WHERE c.state_refs <> '{}';
ALTER TABLE checkpoint_history DROP COLUMN state_refs;
ALTER TABLE workflow_checkpoints DROP COLUMN state_refs;
DROP TABLE state_blobs;
