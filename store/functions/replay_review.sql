-- replay_review approves or rejects a request. An approval names the cohort
-- hash the approver was shown: a request whose hash differs is refused. A
-- signed approval (signed_note, the approver's signed statement) is kept
-- with the request and in the audit row; the database cannot check the
-- signature, only that the statement names this request and its cohort, so
-- a runner that requires signatures checks it against its own keyring.
CREATE OR REPLACE FUNCTION expiryctl.replay_review(
    actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
    after expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay ' || decision, 'expiryctl_approver');
    label := expiryctl.actor_label(actor);
    IF decision NOT IN ('approve', 'reject') THEN
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF decision = 'reject' AND coalesce(why, '') !~ '\S' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why you reject it: --why');
    END IF;
    IF req.status NOT IN ('pending', 'halted') THEN
        PERFORM expiryctl.replay_refuse('single-review', format('replay request %s is %s: it was already reviewed%s',
            request, req.status, coalesce(' by ' || req.reviewed_by, '')));
    END IF;
    IF signed_note IS NOT NULL AND (decision <> 'approve'
        OR position(E'\nrequest ' || request || E'\n' IN signed_note) = 0
        OR position(E'\ncohort ' || encode(req.cohort_hash, 'hex') || E'\n' IN signed_note) = 0) THEN
        PERFORM expiryctl.replay_refuse('signed-approval', format(
            'the signed statement is not an approval of replay request %s with cohort hash %s: sign what `expiryctl replay show %s` shows',
            request, encode(req.cohort_hash, 'hex'), request));
    END IF;
    UPDATE expiryctl.replay_requests
       SET status = CASE WHEN decision = 'approve' THEN 'approved' ELSE 'rejected' END,
           reviewed_by = label, review_why = nullif(why, ''),
           approval_note = CASE WHEN decision = 'approve' THEN signed_note END
     WHERE id = request RETURNING * INTO after;
    -- Checked after the guard trigger's rules (four-eyes, approvers, expiry,
    -- a changed cohort), which say more; a refusal here undoes the update.
    IF decision = 'approve' THEN
        IF shown_cohort_hash IS NULL OR shown_cohort_hash <> req.cohort_hash THEN
            PERFORM expiryctl.replay_refuse('cohort-hash', format(
                'replay request %s has cohort hash %s, not the %s you were shown: run `expiryctl replay show %s` again and approve what it shows',
                request, encode(req.cohort_hash, 'hex'), coalesce(encode(shown_cohort_hash, 'hex'), 'none'), request));
        END IF;
        IF req.fresh_key AND NOT allow_fresh_key THEN
            PERFORM expiryctl.replay_refuse('fresh-key', format(
                'replay request %s gives every job a new idempotency key, so the worker will not recognise a job it already did: approve with --allow-fresh-key if that is what you want', request));
        END IF;
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.' || decision, 'replay_request:' || request, jsonb_build_object(
        'why', coalesce(why, ''), 'cohort_hash', encode(after.cohort_hash, 'hex'), 'items', after.item_count,
        'fresh_key', after.fresh_key, 'allow_fresh_key', allow_fresh_key, 'requested_by', after.requested_by,
        'requested_db_role', after.requested_db_role, 'approval_expires_at', after.approval_expires_at)
        || CASE WHEN signed_note IS NOT NULL THEN jsonb_build_object('signed_statement', signed_note) ELSE '{}' END);
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text) TO expiryctl_approver;
