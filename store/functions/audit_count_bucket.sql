-- audit_count_bucket is the bucket, 0 to 65535, a count tree leaf falls
-- in: the first two bytes, big-endian, of SHA-256 of its key. Like
-- audit_count_key it sets no search_path, and its body is one expression,
-- so that it is inlined.
CREATE OR REPLACE FUNCTION expiryctl.audit_count_bucket(field text, value text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CAST(CAST('x' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.substring(
        pg_catalog.sha256(expiryctl.audit_count_key(field, value)), 1, 2), 'hex') AS pg_catalog.bit(16)) AS pg_catalog.int4)
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_count_bucket(field text, value text) FROM PUBLIC;
