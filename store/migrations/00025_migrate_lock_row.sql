-- +goose Up
-- `expiryctl migrate` serialises on a row of schema_migrate_lock, which
-- goose's table locker makes (as the owner) before any migration runs,
-- where an advisory key did until now: any login that could connect could
-- hold the key and stall every migrate. The table gets what every table of
-- the schema has (00024): row security with one policy that lets a login
-- read, so that only the owner writes its row.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.schema_migrate_lock ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.schema_migrate_lock FOR SELECT USING (true);

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP POLICY reads ON expiryctl.schema_migrate_lock;
ALTER TABLE expiryctl.schema_migrate_lock DISABLE ROW LEVEL SECURITY;
