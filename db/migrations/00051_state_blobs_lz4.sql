-- +goose Up
-- A run loads its state's blobs whole (00050), and lz4 decompresses a 1 MB
-- document ~3x faster than PostgreSQL's default pglz, for ~1.8x the
-- stored size. Only where the server was built with lz4; elsewhere blobs
-- stay pglz. Existing blobs keep their compression until rewritten.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE state_blobs ALTER COLUMN value SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE state_blobs ALTER COLUMN value SET COMPRESSION default;
