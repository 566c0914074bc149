-- audit_build is what an audit row records of the build that wrote it:
-- {"build": "v1.2.0 (commit 1a2b…, modified)"}, from the session setting
-- expiryctl.build, which expiryctl sets when it connects; {} when the
-- session set none (psql, another client). The writers merge it into the
-- row's details, so the row's hash covers it with no change to the
-- canonical encoding: rows written before it verify as they did. It is
-- what the client claims, nothing the database can check; a session can
-- set any value, and a row keeps the one it was written with (the table is
-- append-only). Capped at 200 characters, so that no client bloats every
-- row it writes.
CREATE OR REPLACE FUNCTION expiryctl.audit_build()
RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN coalesce(current_setting('expiryctl.build', true), '') = '' THEN '{}'::jsonb
        ELSE jsonb_build_object('build', left(current_setting('expiryctl.build', true), 200))
    END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_build() FROM PUBLIC;
