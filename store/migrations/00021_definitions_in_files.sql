-- +goose Up
-- From here on each function of the schema is defined once, in a file of
-- its own (store/functions/NAME.sql), which store.ApplyDefinitions applies
-- after the numbered migrations whenever a file's sha256 is not the one
-- recorded here. A numbered migration keeps to tables, columns, indexes,
-- grants and data moves.
SET LOCAL search_path TO pg_catalog, pg_temp;

CREATE TABLE expiryctl.schema_definitions (
    kind text NOT NULL CHECK (kind IN ('function', 'view')),
    name text NOT NULL,
    sha256 bytea NOT NULL CHECK (length(sha256) = 32),
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);
COMMENT ON TABLE expiryctl.schema_definitions IS 'The form of each file of store/functions/ (and views/) this database runs, by sha256; written by expiryctl migrate.';
-- Every command compares it with its own files (store.CheckSchema), as it
-- does with schema_version.
GRANT SELECT ON expiryctl.schema_definitions
    TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;

-- The functions as the numbered migrations left them, so that a migration
-- back below this version puts them back whatever the files made of them
-- meanwhile: a release before this one finds the functions it shipped.
CREATE TABLE expiryctl.schema_definitions_before (
    signature text PRIMARY KEY,
    definition text NOT NULL,
    acl aclitem[],
    description text
);
COMMENT ON TABLE expiryctl.schema_definitions_before IS 'The schema''s functions as migration 00020 left them, for the Down of 00021.';
INSERT INTO expiryctl.schema_definitions_before (signature, definition, acl, description)
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), p.proacl, obj_description(p.oid, 'pg_proc')
  FROM pg_proc p
 WHERE p.pronamespace = 'expiryctl'::regnamespace;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
-- +goose StatementBegin
DO $$
DECLARE
    f record;
    g record;
    owner oid := (SELECT nspowner FROM pg_namespace WHERE nspname = 'expiryctl');
BEGIN
    -- What the files brought that 00020 did not have goes; a trigger of a
    -- later migration on one of them went with that migration's Down.
    FOR f IN SELECT p.oid::regprocedure AS signature
               FROM pg_proc p
              WHERE p.pronamespace = 'expiryctl'::regnamespace
                AND p.oid::regprocedure::text NOT IN (SELECT signature FROM expiryctl.schema_definitions_before)
    LOOP
        EXECUTE format('DROP FUNCTION %s', f.signature);
    END LOOP;
    FOR f IN SELECT * FROM expiryctl.schema_definitions_before ORDER BY signature LOOP
        BEGIN
            EXECUTE f.definition;
        EXCEPTION WHEN invalid_function_definition THEN
            -- the files changed its result or its parameters' names
            EXECUTE format('DROP FUNCTION %s', f.signature);
            EXECUTE f.definition;
        END;
        FOR g IN SELECT DISTINCT a.grantee FROM pg_proc p, aclexplode(p.proacl) a
                  WHERE p.oid = f.signature::regprocedure AND a.grantee <> owner LOOP
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %s', f.signature,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
        END LOOP;
        IF f.acl IS NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f.signature);
        END IF;
        -- in the order of the kept list, which pg_dump shows
        FOR g IN SELECT a.grantee FROM unnest(f.acl) WITH ORDINALITY i(item, n), aclexplode(ARRAY[i.item]) a
                  WHERE a.grantee <> owner AND a.privilege_type = 'EXECUTE' ORDER BY i.n LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f.signature,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
        END LOOP;
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f.signature, f.description);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP TABLE expiryctl.schema_definitions_before;
DROP TABLE expiryctl.schema_definitions;
