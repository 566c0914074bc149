-- permanent_categories are the reason categories a retry cannot fix: the
-- job's data is wrong or gone, or its version moved on.
CREATE OR REPLACE FUNCTION expiryctl.permanent_categories() RETURNS text[]
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY['conflict', 'validation', 'malformed', 'not-found']
$$;

REVOKE ALL ON FUNCTION expiryctl.permanent_categories() FROM PUBLIC;
