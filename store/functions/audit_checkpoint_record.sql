-- audit_checkpoint_record keeps a signed checkpoint of the first tree_size
-- rows and audits it. The signature is checked by whoever reads it, against
-- the verifier key they trust (the database holds no key); but the note is
-- kept only when it is a checkpoint of this trail as the database holds it
-- (rule checkpoint-note): its text names this trail's origin, tree_size
-- and root_hash, the root is the one the server computes from its own
-- tree (audit_tree_root), and a signature line follows. A garbage note
-- would make every export that proves rows against it fail. A note with
-- a count tree line (`counts 65536 ROOT`, docs/audit.md) is kept only when
-- its root is the one audit_counts_extend computed from the same rows, in
-- this transaction: a signer that counted other rows is refused. Only the
-- auditor group records one: a checkpoint is the auditor's word on the
-- trail, and a capture that signs them as it runs needs that group too.
CREATE OR REPLACE FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    stored bigint;
    origin text;
    lines text[];
    body int := 3;
    counted bigint;
    counts_root bytea;
    id bigint;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor');
    label := expiryctl.actor_label(actor);
    SELECT t.tree_size, t.origin INTO stored, origin FROM expiryctl.audit_trail t WHERE t.singleton;
    IF tree_size > stored THEN
        PERFORM expiryctl.replay_refuse('tree-size', format(
            'a checkpoint of %s rows needs them in the tree, which holds %s', tree_size, stored));
    END IF;
    IF root_hash IS DISTINCT FROM expiryctl.audit_tree_root(tree_size) THEN
        PERFORM expiryctl.replay_refuse('checkpoint-note', format(
            'the root hash %s is not the root of the audit tree''s first %s rows as the database computes it',
            encode(root_hash, 'hex'), tree_size));
    END IF;
    lines := string_to_array(signed_note, E'\n');
    IF left(lines[4], 7) = 'counts ' THEN
        body := 4;
        SELECT t.counts_size INTO counted FROM expiryctl.audit_trail t WHERE t.singleton;
        SELECT c.hash INTO counts_root FROM expiryctl.audit_count_tree c WHERE c.level = 16 AND c.n = 0;
        IF counted IS DISTINCT FROM tree_size OR lines[4] IS DISTINCT FROM 'counts 65536 ' || encode(counts_root, 'base64') THEN
            PERFORM expiryctl.replay_refuse('checkpoint-note', format(
                'the note''s count tree line %L is not the count tree the database computes from the first %s rows (it counts %s rows, root %s): the signer counted other rows',
                lines[4], tree_size, counted, encode(counts_root, 'base64')));
        END IF;
    END IF;
    IF cardinality(lines) < body + 3 OR lines[1] IS DISTINCT FROM origin OR lines[2] IS DISTINCT FROM tree_size::text
       OR lines[3] IS DISTINCT FROM encode(root_hash, 'base64') OR lines[body + 1] <> ''
       OR left(lines[body + 2], 2) <> E'\u2014 ' THEN
        PERFORM expiryctl.replay_refuse('checkpoint-note', format(
            'the note is not a signed checkpoint of this trail (%s) at %s rows with that root: it must be the text `audit checkpoint` signs, then a signature line',
            origin, tree_size));
    END IF;
    INSERT INTO expiryctl.audit_checkpoints (tree_size, root_hash, signed_note)
    VALUES (tree_size, root_hash, signed_note) RETURNING audit_checkpoints.id INTO id;
    PERFORM expiryctl.audit_write(label, 'audit.checkpoint', 'audit_checkpoint:' || id, jsonb_build_object(
        'tree_size', tree_size, 'root_hash', encode(root_hash, 'hex')));
    RETURN id;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) TO expiryctl_auditor;
