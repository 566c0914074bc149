-- audit_tree_extend appends the stored hashes of records [old_size,
-- new_size) (record n is the row of seq n + 1). old_size must be the tree's
-- size now: two extenders racing both compute from the same tree and the
-- second is refused (rule tree-moved) to start again. The database cannot
-- recompute the hashes; a wrong one makes every later proof and checkpoint
-- fail to verify, and only the groups trusted to sign checkpoints may write.
CREATE OR REPLACE FUNCTION expiryctl.audit_tree_extend(old_size bigint, new_size bigint, hashes bytea[])
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

REVOKE ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, new_size bigint, hashes bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, new_size bigint, hashes bytea[]) TO expiryctl_auditor, expiryctl_admin, expiryctl_ingester;
