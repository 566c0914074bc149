-- audit_counts_extend brings the count tree from the rows it counts now
-- (audit_trail.counts_size) to the first new_size rows of the trail, and
-- returns its root. The database counts its own rows: for each value of
-- action, actor and target among the new rows, the leaf's count grows by
-- theirs and its newest seq moves to the newest of them; each bucket a
-- leaf changed in is hashed again (SHA-256 of 0x00 and its leaves' bytes,
-- in the order of field and value by their bytes), then each node above
-- it (SHA-256 of 0x01 and its two children, an absent child being the
-- hash of an empty subtree). The signer that calls it has computed the
-- same root from the rows on its own, and audit_checkpoint_record keeps a
-- checkpoint only when its count line names this root: no client hands
-- the database a count. new_size below counts_size is refused (rule
-- counts-moved): another signer counted further meanwhile.
CREATE OR REPLACE FUNCTION expiryctl.audit_counts_extend(new_size bigint)
RETURNS bytea
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    old_size bigint;
    present bigint;
    touched integer[];
    lvl integer;
    empty bytea := sha256('\x00'::bytea);
    root bytea;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor');
    SELECT t.counts_size INTO old_size FROM expiryctl.audit_trail t WHERE t.singleton FOR UPDATE;
    IF new_size < old_size THEN
        PERFORM expiryctl.replay_refuse('counts-moved', format(
            'the count tree counts %s rows, more than the %s asked for: another signer counted further; read it again', old_size, new_size));
    END IF;
    SELECT count(*) INTO present FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size;
    IF present <> new_size - old_size THEN
        RAISE EXCEPTION 'the trail has % rows from seq % to seq %, not %: `expiryctl audit verify` says what changed',
            present, old_size + 1, new_size, new_size - old_size;
    END IF;
    WITH counted AS (
        SELECT 'action' AS field, l.action AS value, count(*) AS n, max(l.seq) AS newest
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.action
        UNION ALL
        SELECT 'actor', l.actor, count(*), max(l.seq)
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.actor
        UNION ALL
        SELECT 'target', l.target, count(*), max(l.seq)
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.target
    ), grown AS (
        INSERT INTO expiryctl.audit_count_leaves AS c (field, value, bucket, rows, newest)
        SELECT counted.field, counted.value, expiryctl.audit_count_bucket(counted.field, counted.value), counted.n, counted.newest
          FROM counted
        ON CONFLICT (field, value) DO UPDATE SET rows = c.rows + excluded.rows, newest = greatest(c.newest, excluded.newest)
        RETURNING c.bucket
    )
    SELECT coalesce(array_agg(DISTINCT grown.bucket), '{}') INTO touched FROM grown;

    INSERT INTO expiryctl.audit_count_tree AS t (level, n, hash)
    SELECT 0, c.bucket, sha256('\x00'::bytea || string_agg(
               expiryctl.audit_count_key(c.field, c.value) || int8send(c.rows) || int8send(c.newest), ''::bytea
               ORDER BY convert_to(c.field, 'UTF8'), convert_to(c.value, 'UTF8')))
      FROM expiryctl.audit_count_leaves c WHERE c.bucket = ANY (touched) GROUP BY c.bucket
    ON CONFLICT (level, n) DO UPDATE SET hash = excluded.hash;
    FOR lvl IN 1..16 LOOP
        SELECT coalesce(array_agg(DISTINCT b >> 1), '{}') INTO touched FROM unnest(touched) AS b;
        INSERT INTO expiryctl.audit_count_tree AS t (level, n, hash)
        SELECT lvl, p, sha256('\x01'::bytea || coalesce(l.hash, empty) || coalesce(r.hash, empty))
          FROM unnest(touched) AS p
          LEFT JOIN expiryctl.audit_count_tree l ON l.level = lvl - 1 AND l.n = 2 * p
          LEFT JOIN expiryctl.audit_count_tree r ON r.level = lvl - 1 AND r.n = 2 * p + 1
        ON CONFLICT (level, n) DO UPDATE SET hash = excluded.hash;
        empty := sha256('\x01'::bytea || empty || empty);
    END LOOP;
    UPDATE expiryctl.audit_trail SET counts_size = new_size WHERE singleton;
    SELECT t.hash INTO root FROM expiryctl.audit_count_tree t WHERE t.level = 16 AND t.n = 0;
    RETURN coalesce(root, empty);
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_counts_extend(new_size bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_counts_extend(new_size bigint) TO expiryctl_auditor;
