-- audit_tree_root is the root hash of the audit tree's first size records,
-- from the stored hashes, as tlog.TreeHash computes it: the complete
-- subtrees that make up size, largest first, folded from the right with
-- SHA-256(0x01 || left || right). NULL for an empty tree or a size the
-- tree does not hold yet.
CREATE OR REPLACE FUNCTION expiryctl.audit_tree_root(size bigint) RETURNS bytea
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    subtrees bytea[] := '{}';
    start bigint := 0;
    lvl integer;
    m bigint;
    h bytea;
    root bytea;
    i integer;
BEGIN
    IF size < 1 OR size > (SELECT t.tree_size FROM expiryctl.audit_trail t WHERE t.singleton) THEN
        RETURN NULL;
    END IF;
    FOR lvl IN REVERSE 62..0 LOOP
        IF size & (1::bigint << lvl) <> 0 THEN
            -- The subtree (lvl, start >> lvl), at tlog's StoredHashIndex:
            -- 2m - popcount(m) + lvl, m = ((start >> lvl) + 1 << lvl) - 1.
            m := (((start >> lvl) + 1) << lvl) - 1;
            SELECT t.hash INTO STRICT h FROM expiryctl.audit_tree t WHERE t.idx = 2 * m - bit_count(m::bit(64)) + lvl;
            subtrees := subtrees || h;
            start := start + (1::bigint << lvl);
        END IF;
    END LOOP;
    root := subtrees[cardinality(subtrees)];
    FOR i IN REVERSE cardinality(subtrees) - 1..1 LOOP
        root := sha256('\x01'::bytea || subtrees[i] || root);
    END LOOP;
    RETURN root;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_tree_root(size bigint) FROM PUBLIC;
