-- +goose Up
-- The count tree (issue 31): for each value of action, actor and target,
-- how many of the trail's first counts_size rows hold it and the newest
-- seq among them, so that a checkpoint can sign it and a filtered export
-- prove that it left no row out. Leaves fall into 65536 buckets by the
-- first two bytes of SHA-256 of their key; a bucket is one record of an
-- RFC 6962 tree of 65536 records, stored by level and index. Only
-- audit_counts_extend writes them, from the trail's own rows, in the
-- transaction that records the checkpoint; row security binds every other
-- writer, as on every table (00024).
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.audit_trail ADD COLUMN counts_size bigint NOT NULL DEFAULT 0
    CONSTRAINT audit_trail_counts_size_check CHECK (counts_size >= 0);

CREATE TABLE expiryctl.audit_count_leaves (
    field text NOT NULL CONSTRAINT audit_count_leaves_field_check CHECK (field IN ('action', 'actor', 'target')),
    value text NOT NULL,
    bucket integer NOT NULL CONSTRAINT audit_count_leaves_bucket_check CHECK (bucket BETWEEN 0 AND 65535),
    rows bigint NOT NULL CONSTRAINT audit_count_leaves_rows_check CHECK (rows > 0),
    newest bigint NOT NULL CONSTRAINT audit_count_leaves_newest_check CHECK (newest > 0),
    PRIMARY KEY (field, value)
);
CREATE INDEX audit_count_leaves_bucket ON expiryctl.audit_count_leaves (bucket);
COMMENT ON TABLE expiryctl.audit_count_leaves IS
    'How many of the first audit_trail.counts_size audit rows hold each value of action, actor and target, and the newest of them (docs/audit.md, complete filtered exports)';

CREATE TABLE expiryctl.audit_count_tree (
    level smallint NOT NULL CONSTRAINT audit_count_tree_level_check CHECK (level BETWEEN 0 AND 16),
    n integer NOT NULL CONSTRAINT audit_count_tree_n_check CHECK (n >= 0 AND n < (65536 >> level)),
    hash bytea NOT NULL CONSTRAINT audit_count_tree_hash_check CHECK (length(hash) = 32),
    PRIMARY KEY (level, n)
);
COMMENT ON TABLE expiryctl.audit_count_tree IS
    'The count tree''s hashes, level 0 the buckets'' record hashes, level 16 the root; a node under which no leaf falls is not stored';

ALTER TABLE expiryctl.audit_count_leaves ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_count_leaves FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_count_tree ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_count_tree FOR SELECT USING (true);

REVOKE ALL ON expiryctl.audit_count_leaves, expiryctl.audit_count_tree FROM PUBLIC;
GRANT SELECT ON expiryctl.audit_count_leaves, expiryctl.audit_count_tree TO expiryctl_auditor;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TABLE expiryctl.audit_count_tree;
DROP TABLE expiryctl.audit_count_leaves;
ALTER TABLE expiryctl.audit_trail DROP COLUMN counts_size;
