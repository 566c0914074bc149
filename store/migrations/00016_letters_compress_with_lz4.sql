-- +goose Up
-- A captured letter's row is about 2.3 kB before compression, above the 2 kB
-- at which PostgreSQL compresses a row's largest values, so every insert
-- compressed its headers with pglz: about 7% of the server's CPU per letter
-- at capture (perf on the ingest backend, issue 17), where lz4 takes about
-- 1% for the same size (498 against 499 bytes for the benchmark's
-- headers). Rows already stored keep pglz; each value records its method,
-- so they read as before. A server built without lz4 keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE expiryctl.dead_letters
        ALTER COLUMN headers SET COMPRESSION lz4,
        ALTER COLUMN attempt_history SET COMPRESSION lz4,
        ALTER COLUMN properties SET COMPRESSION lz4,
        ALTER COLUMN payload SET COMPRESSION lz4,
        ALTER COLUMN last_error SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL was built without lz4: dead letters stay compressed with pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE expiryctl.dead_letters
    ALTER COLUMN headers SET COMPRESSION default,
    ALTER COLUMN attempt_history SET COMPRESSION default,
    ALTER COLUMN properties SET COMPRESSION default,
    ALTER COLUMN payload SET COMPRESSION default,
    ALTER COLUMN last_error SET COMPRESSION default;
