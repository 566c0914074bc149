-- audit_count_key is the key of a count tree leaf: the field's name and
-- the value, each as its byte length (4 bytes, big-endian) and its UTF-8
-- bytes (docs/audit.md, complete filtered exports). It sets no search_path
-- (it names pg_catalog's functions itself) so that the planner inlines it
-- into audit_counts_extend's statements: a function call a row costs a
-- first count of a million rows most of its time.
CREATE OR REPLACE FUNCTION expiryctl.audit_count_key(field text, value text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.int4send(pg_catalog.octet_length(field)) OPERATOR(pg_catalog.||) pg_catalog.convert_to(field, 'UTF8')
        OPERATOR(pg_catalog.||) pg_catalog.int4send(pg_catalog.octet_length(value)) OPERATOR(pg_catalog.||) pg_catalog.convert_to(value, 'UTF8')
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_count_key(field text, value text) FROM PUBLIC;
