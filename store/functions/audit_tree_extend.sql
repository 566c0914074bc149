-- audit_tree_extend adds up to batch rows of the trail to its Merkle tree,
-- after old_size (record n is the row of seq n + 1), and returns the
-- tree's size after. The database computes every hash from its own rows,
-- as golang.org/x/mod/sumdb/tlog does (RFC 6962): a record's hash is
-- SHA-256(0x00 || the row's chain hash), a node's SHA-256(0x01 || left ||
-- right), stored at tlog's StoredHashIndex, the record's hash followed by
-- the nodes it completes. No client offers a hash, so no group can make
-- the tree disagree with the trail. old_size must be the tree's size now:
-- two extenders racing both start from the same tree and the second is
-- refused (rule tree-moved) to read it again.
CREATE OR REPLACE FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    current_size bigint;
    size bigint;
    r record;
    k bigint;
    lvl integer;
    h bytea;
    sibling bytea;
    first_idx bigint;
    sibling_idx bigint;
    pending bytea[] := '{}';
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    SELECT tree_size INTO current_size FROM expiryctl.audit_trail WHERE singleton FOR UPDATE;
    IF old_size <> current_size THEN
        PERFORM expiryctl.replay_refuse('tree-moved', format(
            'the audit tree holds %s rows, not %s: another process extended it; read it again', current_size, old_size));
    END IF;
    size := old_size;
    -- The batch's hashes are kept in pending (pending[i] is stored hash
    -- first_idx + i - 1) and written in one statement at the end; a
    -- sibling below first_idx is read from the table.
    first_idx := 2 * old_size - bit_count(old_size::bit(64));
    FOR r IN SELECT seq, hash FROM expiryctl.audit_log WHERE seq > old_size ORDER BY seq LIMIT greatest(batch, 1) LOOP
        IF r.seq <> size + 1 THEN
            RAISE EXCEPTION 'the trail has seq % where seq % belongs: `expiryctl audit verify` says what changed', r.seq, size + 1;
        END IF;
        h := sha256('\x00'::bytea || r.hash);
        pending := pending || h;
        k := size;
        lvl := 0;
        WHILE k & 1 = 1 LOOP
            -- The left sibling: the subtree (lvl, k - 1), at tlog's
            -- StoredHashIndex = 2m - popcount(m) + lvl, m = (k << lvl) - 1.
            sibling_idx := 2 * ((k << lvl) - 1) - bit_count(((k << lvl) - 1)::bit(64)) + lvl;
            IF sibling_idx >= first_idx THEN
                sibling := pending[sibling_idx - first_idx + 1];
            ELSE
                SELECT t.hash INTO STRICT sibling FROM expiryctl.audit_tree t WHERE t.idx = sibling_idx;
            END IF;
            h := sha256('\x01'::bytea || sibling || h);
            pending := pending || h;
            k := k >> 1;
            lvl := lvl + 1;
        END LOOP;
        size := size + 1;
    END LOOP;
    INSERT INTO expiryctl.audit_tree (idx, hash)
    SELECT first_idx + p.ord - 1, p.hash FROM unnest(pending) WITH ORDINALITY AS p(hash, ord);
    IF size > old_size THEN
        UPDATE expiryctl.audit_trail SET tree_size = size,
               origin = coalesce(origin, 'expiryctl audit trail ' || gen_random_uuid()) WHERE singleton;
    END IF;
    RETURN size;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) TO expiryctl_auditor, expiryctl_admin, expiryctl_ingester;
