-- +goose Up
-- The trail becomes a transparency log. The hash chain stays; beside it a
-- Merkle tree (RFC 6962 hashing, computed by expiryctl with
-- golang.org/x/mod/sumdb/tlog over each row's chain hash) is stored as tlog
-- stores it, one hash per stored index, so that a tree head or a proof reads
-- O(log n) hashes. A signed checkpoint (a signed note of the trail's origin,
-- tree size and root hash) is kept here as well as by whoever signed it; a
-- later trail must still contain that tree.
--
-- The tree is extended by the callers that need it (a checkpoint, an
-- export), not by every audited action, so an audit row costs what it cost.

-- origin names this trail in every checkpoint, so that a checkpoint or a
-- proof of one trail cannot pass for another's. It is drawn when the tree
-- is first extended, not here: a database created from a migrated template
-- is a trail of its own.
CREATE TABLE expiryctl.audit_trail (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    origin text,
    tree_size bigint NOT NULL DEFAULT 0 CHECK (tree_size >= 0)
);
INSERT INTO expiryctl.audit_trail DEFAULT VALUES;

CREATE TABLE expiryctl.audit_tree (
    idx bigint PRIMARY KEY CHECK (idx >= 0),
    hash bytea NOT NULL CHECK (length(hash) = 32)
);
COMMENT ON TABLE expiryctl.audit_tree IS
    'tlog stored hashes of the audit trail (index tlog.StoredHashIndex); the first audit_trail.tree_size rows are in it';

CREATE TABLE expiryctl.audit_checkpoints (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tree_size bigint NOT NULL CHECK (tree_size >= 0),
    root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
    signed_note text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL DEFAULT session_user
);

CREATE TRIGGER audit_tree_no_update BEFORE UPDATE OR DELETE ON expiryctl.audit_tree
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();
CREATE TRIGGER audit_tree_no_truncate BEFORE TRUNCATE ON expiryctl.audit_tree
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE OR DELETE ON expiryctl.audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON expiryctl.audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();
ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_update;
ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_truncate;
ALTER TABLE expiryctl.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_update;
ALTER TABLE expiryctl.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_truncate;

-- +goose StatementBegin
-- audit_tree_extend appends the stored hashes of records [old_size,
-- new_size) (record n is the row of seq n + 1). old_size must be the tree's
-- size now: two extenders racing both compute from the same tree and the
-- second is refused (rule tree-moved) to start again. The database cannot
-- recompute the hashes; a wrong one makes every later proof and checkpoint
-- fail to verify, and only the groups trusted to sign checkpoints may write.
CREATE FUNCTION expiryctl.audit_tree_extend(old_size bigint, new_size bigint, hashes bytea[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    current_size bigint;
    rows_now bigint;
    first_idx bigint;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    SELECT tree_size INTO current_size FROM expiryctl.audit_trail WHERE singleton FOR UPDATE;
    IF old_size <> current_size THEN
        PERFORM expiryctl.replay_refuse('tree-moved', format(
            'the audit tree holds %s rows, not %s: another process extended it; read it again', current_size, old_size));
    END IF;
    SELECT coalesce(max(seq), 0) INTO rows_now FROM expiryctl.audit_log;
    IF new_size < old_size OR new_size > rows_now THEN
        PERFORM expiryctl.replay_refuse('tree-size', format(
            'the audit tree cannot grow from %s to %s rows: the trail has %s', old_size, new_size, rows_now));
    END IF;
    -- tlog.StoredHashCount(n) = 2n - popcount(n).
    first_idx := 2 * old_size - bit_count(old_size::bit(64));
    IF coalesce(cardinality(hashes), 0) <> (2 * new_size - bit_count(new_size::bit(64))) - first_idx THEN
        PERFORM expiryctl.replay_refuse('tree-size', format(
            'growing the audit tree from %s to %s rows stores %s hashes, not %s', old_size, new_size,
            (2 * new_size - bit_count(new_size::bit(64))) - first_idx, coalesce(cardinality(hashes), 0)));
    END IF;
    INSERT INTO expiryctl.audit_tree (idx, hash)
    SELECT first_idx + h.ord - 1, h.hash FROM unnest(hashes) WITH ORDINALITY AS h(hash, ord);
    UPDATE expiryctl.audit_trail SET tree_size = new_size,
           origin = coalesce(origin, 'expiryctl audit trail ' || gen_random_uuid()) WHERE singleton;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- audit_checkpoint_record keeps a signed checkpoint of the first tree_size
-- rows and audits it. The signature is checked by whoever reads it, against
-- the verifier key they trust; the database keeps the note as it was given.
CREATE FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    stored bigint;
    id bigint;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    SELECT t.tree_size INTO stored FROM expiryctl.audit_trail t WHERE t.singleton;
    IF tree_size > stored THEN
        PERFORM expiryctl.replay_refuse('tree-size', format(
            'a checkpoint of %s rows needs them in the tree, which holds %s', tree_size, stored));
    END IF;
    INSERT INTO expiryctl.audit_checkpoints (tree_size, root_hash, signed_note)
    VALUES (tree_size, root_hash, signed_note) RETURNING audit_checkpoints.id INTO id;
    PERFORM expiryctl.audit_write(label, 'audit.checkpoint', 'audit_checkpoint:' || id, jsonb_build_object(
        'tree_size', tree_size, 'root_hash', encode(root_hash, 'hex')));
    RETURN id;
END
$$;
-- +goose StatementEnd

REVOKE ALL ON expiryctl.audit_trail, expiryctl.audit_tree, expiryctl.audit_checkpoints FROM PUBLIC;
GRANT SELECT ON expiryctl.audit_trail, expiryctl.audit_tree, expiryctl.audit_checkpoints
    TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
-- The ingester signs periodic checkpoints (dlq ingest --follow
-- --checkpoint-key), which read the rows' place and hash, and nothing else.
GRANT SELECT (seq, hash) ON expiryctl.audit_log TO expiryctl_ingester;
REVOKE EXECUTE ON FUNCTION expiryctl.audit_tree_extend(bigint, bigint, bytea[]),
    expiryctl.audit_checkpoint_record(text, bigint, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_tree_extend(bigint, bigint, bytea[]),
    expiryctl.audit_checkpoint_record(text, bigint, bytea, text)
    TO expiryctl_auditor, expiryctl_admin, expiryctl_ingester;

-- +goose Down
REVOKE SELECT (seq, hash) ON expiryctl.audit_log FROM expiryctl_ingester;
DROP FUNCTION expiryctl.audit_checkpoint_record(text, bigint, bytea, text);
DROP FUNCTION expiryctl.audit_tree_extend(bigint, bigint, bytea[]);
DROP TABLE expiryctl.audit_checkpoints;
DROP TABLE expiryctl.audit_tree;
DROP TABLE expiryctl.audit_trail;
