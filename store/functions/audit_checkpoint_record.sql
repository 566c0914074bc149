-- audit_checkpoint_record keeps a signed checkpoint of the first tree_size
-- rows and audits it. The signature is checked by whoever reads it, against
-- the verifier key they trust; the database keeps the note as it was given.
CREATE OR REPLACE FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text)
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

REVOKE ALL ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) TO expiryctl_auditor, expiryctl_admin, expiryctl_ingester;
