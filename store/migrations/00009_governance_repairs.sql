-- +goose Up
-- What 00008 first shipped with, repaired. A database migrated by it keeps
-- that form of the schema until this migration runs, so the repairs are
-- here rather than in 00008:
--
--   * not_found names a missing request, letter or policy change (EG002),
--     which review, cancel, run and policy review raise;
--   * audit_append leaves membership to EXECUTE (granted to the five groups
--     only), reads the policy only for a label that is not the login, and
--     lists the reserved actions itself, replay.canary.* among them;
--     audit_reserved goes;
--   * purge_letters voids an open request holding letters past retention
--     instead of leaving its frozen cohort without payloads;
--   * replay_request_create keeps the cohort in arrays, not a table in
--     pg_temp, which a session could have prepared beforehand;
--   * the canary's rows are the runner's (replay_canary_record);
--   * only operators cancel, as the table of groups says.

-- +goose StatementBegin
-- not_found raises "no such object" (SQLSTATE EG002, the detail kind:id)
-- for expiryctl to name it, with the command that lists the ones there are.
CREATE FUNCTION expiryctl.not_found(kind text, id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', CASE kind
            WHEN 'dead_letter' THEN format('dead letter %s not found: `expiryctl dlq list` shows the ids there are', id)
            WHEN 'replay_request' THEN format('replay request %s not found: `expiryctl replay list` shows the requests there are', id)
            WHEN 'policy_change' THEN format('policy change %s not found: `expiryctl policy show` lists the pending ones', id)
            ELSE format('%s %s not found', kind, id) END
        USING ERRCODE = 'EG002', DETAIL = kind || ':' || id;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- audit_append is how a command records what it did: reads, and the
-- refusals and failures of anything. It is on every command's path, and a
-- command runs in a new session, where every catalog it touches is read
-- afresh: so it is one plain-SQL statement, membership is left to EXECUTE
-- (granted to the five groups only), the policy is read only for a label
-- that is not the login, and PL/pgSQL loads only for a refusal.
CREATE OR REPLACE FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text)
RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    SELECT CASE
               WHEN coalesce(btrim(actor), '') = '' THEN session_user::text
               WHEN actor = session_user THEN actor
               ELSE expiryctl.actor_label(actor)
           END,
           CASE WHEN outcome = 'ok' AND action IN ('replay.request', 'replay.approve', 'replay.reject', 'replay.cancel',
                    'replay.expire', 'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled', 'replay.halt',
                    'replay.canary.start', 'replay.canary.pass', 'replay.complete', 'policy.set', 'policy.propose',
                    'policy.approve', 'policy.reject', 'access.grant', 'access.revoke', 'dlq.ingest.batch',
                    'dlq.purge.batch', 'migrate.governance')
                THEN expiryctl.refuse_text('audit-reserved', format(
                    'an "ok" %s row is written only by the database function that makes the change, in the same transaction', action))
                ELSE action END,
           coalesce(target, ''), coalesce(details, '{}'), outcome
    RETURNING audit_log.seq, encode(audit_log.hash, 'hex')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- purge_letters redacts the payload and headers of up to batch letters
-- dead-lettered before cutoff, which must lie outside the policy's
-- retention window. A frozen cohort cannot lose a payload, so an open
-- request holding such a letter is voided first (cancelled, audited).
-- Returns the ids redacted.
CREATE OR REPLACE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamptz, batch integer)
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    keep interval;
    ids bigint[];
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('dlq purge', 'expiryctl_operator', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT retention INTO keep FROM expiryctl.policy WHERE singleton;
    IF cutoff > now() - keep THEN
        PERFORM expiryctl.replay_refuse('retention', format(
            'the policy keeps letters for %s: a purge may redact only letters dead-lettered before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    FOR rid IN SELECT DISTINCT i.request_id FROM expiryctl.replay_items i
                 JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                WHERE i.open AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL
                ORDER BY 1 LOOP
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided: dlq purge redacted letters past retention that it held'
         WHERE id = rid AND status IN ('pending', 'approved', 'running', 'halted');
        IF FOUND THEN
            PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || rid, jsonb_build_object(
                'why', 'voided by dlq purge: letters it held passed the retention window', 'cutoff', cutoff));
        END IF;
    END LOOP;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now()
         WHERE id IN (SELECT id FROM expiryctl.dead_letters
                       WHERE dead_lettered_at < cutoff AND redacted_at IS NULL AND status <> 'in_request'
                       ORDER BY id LIMIT greatest(batch, 1) FOR UPDATE SKIP LOCKED)
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM redacted;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_request_create freezes a new request. Nothing of the cohort comes
-- from the client: the database resolves the selection, hashes each
-- payload as stored, numbers the items, counts them and hashes the cohort
-- (sha256 over each item's big-endian id and payload hash, in run order).
CREATE OR REPLACE FUNCTION expiryctl.replay_request_create(
    actor text, kind text, selection jsonb, rate numeric, canary integer,
    to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean)
RETURNS TABLE (request_id bigint, matched integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    pol expiryctl.policy%ROWTYPE;
    wanted bigint[];
    c_ids bigint[];
    c_hashes bytea[];
    bound integer;
    n integer;
    bad_redacted text;
    bad_taken text;
    bad_decided text;
    bad_changed text;
    bad_target text;
    eff_rate numeric;
    eff_canary integer;
    rid bigint;
    chash bytea;
BEGIN
    PERFORM expiryctl.require_role('replay request', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    IF kind NOT IN ('replay', 'discard') THEN
        PERFORM expiryctl.replay_refuse('kind', format('unknown request kind %L: replay or discard', kind));
    END IF;
    IF coalesce(btrim(why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why: --why names the incident or ticket');
    END IF;
    IF fresh_key AND NOT confirm_eligible THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a fresh idempotency key needs --confirm-eligible: confirm the reservations are still eligible to expire');
    END IF;
    IF fresh_key AND kind = 'discard' THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a discard does not publish, so --fresh-key does not apply');
    END IF;
    PERFORM expiryctl.replay_expire_stale(actor);
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton FOR SHARE;

    SELECT coalesce(array_agg(x::bigint ORDER BY ord), '{}') INTO wanted
      FROM jsonb_array_elements_text(coalesce(selection->'ids', '[]')) WITH ORDINALITY AS t(x, ord);
    bound := nullif(selection->>'max', '')::integer;
    IF cardinality(wanted) = 0 AND coalesce(bound, 0) <= 0 THEN
        PERFORM expiryctl.replay_refuse('bounded-cohort', 'a filter needs --max N: a request is bounded');
    END IF;
    eff_rate := coalesce(nullif(rate, 0), pol.max_rate);
    IF eff_rate > pol.max_rate THEN
        PERFORM expiryctl.replay_refuse('max-rate', format('rate %s/s is above the policy maximum of %s/s: lower --rate', eff_rate, pol.max_rate));
    END IF;
    IF bound > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('--max %s is above the policy maximum of %s letters per request', bound, pol.max_cohort));
    END IF;
    IF cardinality(wanted) > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('%s ids is above the policy maximum of %s letters per request', cardinality(wanted), pol.max_cohort));
    END IF;

    -- The cohort is c_ids in run order (ordinal = position - 1), locked,
    -- with c_hashes the sha256 of each stored payload. Arrays, not a
    -- temporary table: a table in pg_temp could be the caller's own, with
    -- their triggers on it.
    IF cardinality(wanted) > 0 THEN
        SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}') INTO c_ids
          FROM (SELECT id FROM expiryctl.dead_letters WHERE id = ANY (wanted) ORDER BY id FOR UPDATE) d;
        IF cardinality(c_ids) < (SELECT count(DISTINCT x) FROM unnest(wanted) x) THEN
            SELECT min(x) INTO rid FROM unnest(wanted) x WHERE x <> ALL (c_ids);
            PERFORM expiryctl.not_found('dead_letter', rid);
        END IF;
        matched := cardinality(c_ids);
    ELSE
        SELECT count(*) INTO matched FROM expiryctl.letters_matching(selection->'filter');
        SELECT coalesce(array_agg(m.id ORDER BY m.dead_lettered_at, m.id), '{}') INTO c_ids
          FROM (SELECT d.id, d.dead_lettered_at FROM expiryctl.letters_matching(selection->'filter') l
                  JOIN expiryctl.dead_letters d ON d.id = l.id
                 ORDER BY l.dead_lettered_at, l.id LIMIT bound FOR UPDATE OF d) m;
    END IF;
    n := cardinality(c_ids);
    IF n = 0 THEN
        PERFORM expiryctl.replay_refuse('empty-cohort', 'no dead letter waiting for a decision matches: check the filter with `expiryctl dlq list` (letters already replayed, discarded or in an open request are not eligible)');
    END IF;
    SELECT array_agg(sha256(d.payload) ORDER BY c.ord) INTO c_hashes
      FROM unnest(c_ids) WITH ORDINALITY AS c(id, ord) JOIN expiryctl.dead_letters d ON d.id = c.id;

    SELECT string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.redacted_at IS NOT NULL),
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.status = 'in_request'),
           string_agg(d.id || ' (' || d.status || ')', ', ' ORDER BY d.id) FILTER (WHERE d.status <> 'dead'),
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.payload_sha256 <> c.h),
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.original_exchange IS NULL
               AND d.original_routing_key IS NULL AND d.origin_queue IS NULL)
      INTO bad_redacted, bad_taken, bad_decided, bad_changed, bad_target
      FROM unnest(c_ids, c_hashes) AS c(id, h) JOIN expiryctl.dead_letters d ON d.id = c.id;
    IF bad_redacted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('redacted', format('dead letters %s were redacted by retention: there is no payload left to replay', bad_redacted));
    END IF;
    IF bad_taken IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('one-open-request', format('dead letters %s are already in another open request: leave them out, or cancel that request first (`expiryctl replay list --status pending`)', bad_taken));
    END IF;
    IF bad_decided IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('decided', format('dead letters %s were already decided and cannot join a request', bad_decided));
    END IF;
    IF bad_changed IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letters %s no longer hash as they did when captured: their payload was changed outside expiryctl', bad_changed));
    END IF;
    IF kind = 'replay' AND coalesce(to_exchange, '') = '' AND coalesce(to_routing_key, '') = '' AND bad_target IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('dead letters %s name no origin (no x-original-exchange, no x-death queue): add --to-exchange and --routing-key', bad_target));
    END IF;

    eff_canary := CASE WHEN kind = 'replay' THEN greatest(1, n / 10) ELSE 0 END;
    IF canary IS NOT NULL THEN
        eff_canary := least(greatest(canary, 0), n);
    END IF;
    SELECT sha256(string_agg(int8send(c.id) || c.h, ''::bytea ORDER BY c.ord)) INTO chash
      FROM unnest(c_ids, c_hashes) WITH ORDINALITY AS c(id, h, ord);

    INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash, rate, canary, stop_failure_ratio,
        stop_queue_depth, stop_redead_ratio, canary_window, fresh_key, eligibility_confirmed, to_exchange,
        to_routing_key, why, requested_by, expires_at)
    VALUES (kind, selection, n, chash, eff_rate, eff_canary, pol.stop_failure_ratio, pol.stop_queue_depth,
        pol.stop_redead_ratio, pol.canary_window, fresh_key, confirm_eligible, nullif(to_exchange, ''),
        nullif(to_routing_key, ''), why, label, now() + pol.approval_ttl)
    RETURNING id INTO rid;
    INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal)
    SELECT rid, c.id, c.h, (c.ord - 1)::integer FROM unnest(c_ids, c_hashes) WITH ORDINALITY AS c(id, h, ord);
    UPDATE expiryctl.dead_letters SET status = 'in_request' WHERE id = ANY (c_ids);
    PERFORM expiryctl.audit_write(label, 'replay.request', 'replay_request:' || rid, jsonb_build_object(
        'kind', kind, 'selection', selection, 'matched', matched, 'items', to_jsonb(c_ids),
        'cohort_hash', encode(chash, 'hex'), 'rate', eff_rate, 'canary', eff_canary, 'fresh_key', fresh_key,
        'to_exchange', coalesce(to_exchange, ''), 'to_routing_key', coalesce(to_routing_key, ''), 'why', why));
    request_id := rid;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_review approves or rejects a request. An approval names the cohort
-- hash the approver was shown: a request whose hash differs is refused.
CREATE OR REPLACE FUNCTION expiryctl.replay_review(
    actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea)
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
    IF decision = 'reject' AND coalesce(btrim(why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why you reject it: --why');
    END IF;
    IF req.status NOT IN ('pending', 'halted') THEN
        PERFORM expiryctl.replay_refuse('single-review', format('replay request %s is %s: it was already reviewed%s',
            request, req.status, coalesce(' by ' || req.reviewed_by, '')));
    END IF;
    UPDATE expiryctl.replay_requests
       SET status = CASE WHEN decision = 'approve' THEN 'approved' ELSE 'rejected' END,
           reviewed_by = label, review_why = nullif(why, '')
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
        'requested_db_role', after.requested_db_role, 'approval_expires_at', after.approval_expires_at));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
BEGIN
    PERFORM expiryctl.require_role('replay cancel', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    UPDATE expiryctl.replay_requests SET status = 'cancelled', halt_reason = 'cancelled by ' || label WHERE id = request;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || request,
                                  jsonb_build_object('why', coalesce(why, '')));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_run_start moves an approved request to running (spending the
-- approval) or takes over a running one whose runner is gone. Returns
-- whether it resumed and the label the run records.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_start(actor text, request bigint)
RETURNS TABLE (resumed boolean, label text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    states jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    CASE req.status
    WHEN 'approved' THEN
        UPDATE expiryctl.replay_requests SET status = 'running', started_db_role = session_user WHERE id = request
        RETURNING * INTO req;
        resumed := false;
    WHEN 'running' THEN
        resumed := true;
    WHEN 'pending' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is pending approval: ask an approver to run `expiryctl replay approve %s`', request, request));
    WHEN 'halted' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s was halted (%s): it needs a new approval before it runs again: ask an approver to run `expiryctl replay approve %s`',
            request, req.halt_reason, request));
    ELSE
        PERFORM expiryctl.replay_refuse('terminal', format(
            'replay request %s is %s: it is over and cannot run; make a new request with `expiryctl replay request`', request, req.status));
    END CASE;
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO states
      FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items WHERE request_id = request GROUP BY state) s;
    PERFORM expiryctl.audit_write(label, 'replay.run.start', 'replay_request:' || request, jsonb_build_object(
        'resume', resumed, 'approval', req.approvals, 'approved_by', req.reviewed_by,
        'approved_db_role', req.reviewed_db_role, 'kind', req.kind, 'items', req.item_count, 'states', states,
        'rate', req.rate, 'canary', req.canary, 'fresh_key', req.fresh_key,
        'stop_conditions', jsonb_build_object('failure_ratio', req.stop_failure_ratio, 'queue_depth', req.stop_queue_depth,
            'redead_ratio', req.stop_redead_ratio, 'canary_window', extract(epoch FROM req.canary_window) * 1e9)));
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- policy_review applies (approve) or drops (reject) a pending proposal; the
-- reviewer's login must differ from the proposer's.
CREATE OR REPLACE FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    c expiryctl.policy_changes%ROWTYPE;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy ' || decision, 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT * INTO c FROM expiryctl.policy_changes WHERE id = change FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('policy_change', change);
    END IF;
    IF c.status <> 'pending' THEN
        PERFORM expiryctl.replay_refuse('single-review', format('policy change %s is %s: it was already reviewed by %s',
            change, c.status, coalesce(c.reviewed_by, 'nobody')));
    END IF;
    IF c.proposed_db_role = session_user THEN
        PERFORM expiryctl.replay_refuse('four-eyes', format(
            'the login %s proposed policy change %s and cannot review it, whatever --actor says: another admin must', session_user, change));
    END IF;
    IF decision = 'approve' THEN
        SELECT * INTO r FROM expiryctl.policy_apply(c.changes, label);
        UPDATE expiryctl.policy_changes SET status = 'applied', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.approve', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'proposed_db_role', c.proposed_db_role,
            'why', coalesce(why, ''), 'before', r.before, 'after', r.after));
    ELSIF decision = 'reject' THEN
        UPDATE expiryctl.policy_changes SET status = 'rejected', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.reject', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'why', coalesce(why, '')));
    ELSE
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
END
$$;
-- +goose StatementEnd

DROP FUNCTION expiryctl.audit_reserved(text);

-- +goose StatementBegin
-- replay_canary_record writes a running request's canary milestones: a
-- resumed run reads them to know how long the canary already waited, or
-- that it passed, so only the request's runner writes them.
CREATE FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: a canary belongs to a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    PERFORM expiryctl.audit_write(label, CASE WHEN passed THEN 'replay.canary.pass' ELSE 'replay.canary.start' END,
        'replay_request:' || request, coalesce(details, '{}') || jsonb_build_object('approval', req.approvals));
END
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION expiryctl.not_found(text, bigint), expiryctl.replay_canary_record(text, bigint, boolean, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_canary_record(text, bigint, boolean, jsonb) TO expiryctl_operator;
REVOKE EXECUTE ON FUNCTION expiryctl.replay_cancel(text, bigint, text) FROM expiryctl_approver;

-- +goose Down
GRANT EXECUTE ON FUNCTION expiryctl.replay_cancel(text, bigint, text) TO expiryctl_approver;
DROP FUNCTION expiryctl.replay_canary_record(text, bigint, boolean, jsonb);

-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_reserved(action text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT action IN ('replay.request', 'replay.approve', 'replay.reject', 'replay.cancel', 'replay.expire',
                      'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled', 'replay.halt',
                      'replay.complete', 'policy.set', 'policy.propose', 'policy.approve', 'policy.reject',
                      'access.grant', 'access.revoke', 'dlq.ingest.batch', 'dlq.purge.batch', 'migrate.governance')
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION expiryctl.audit_reserved(text) FROM PUBLIC;

-- +goose StatementBegin
-- audit_append is how a command records what it did: reads, and the
-- refusals and failures of anything. One plain-SQL statement, so that the
-- audit row of a read command costs no PL/pgSQL load.
CREATE OR REPLACE FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text)
RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    SELECT CASE WHEN expiryctl.caller_in('expiryctl_ingester', 'expiryctl_operator', 'expiryctl_approver',
                                         'expiryctl_auditor', 'expiryctl_admin')
                THEN expiryctl.actor_label(actor)
                ELSE expiryctl.refuse_text('role', format('the login %s is in no expiryctl group: ask the schema owner to run `expiryctl access grant %s GROUP`',
                                                          session_user, session_user)) END,
           CASE WHEN outcome = 'ok' AND expiryctl.audit_reserved(action)
                THEN expiryctl.refuse_text('audit-reserved', format(
                    'an "ok" %s row is written only by the database function that makes the change, in the same transaction', action))
                ELSE action END,
           coalesce(target, ''), coalesce(details, '{}'), outcome
    RETURNING audit_log.seq, encode(audit_log.hash, 'hex')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- purge_letters redacts the payload and headers of up to batch letters
-- dead-lettered before cutoff, which must lie outside the policy's
-- retention window. Letters an open request holds are left alone: their
-- cohort is frozen. Returns the ids redacted.
CREATE OR REPLACE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamptz, batch integer)
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    keep interval;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('dlq purge', 'expiryctl_operator', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT retention INTO keep FROM expiryctl.policy WHERE singleton;
    IF cutoff > now() - keep THEN
        PERFORM expiryctl.replay_refuse('retention', format(
            'the policy keeps letters for %s: a purge may redact only letters dead-lettered before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now()
         WHERE id IN (SELECT id FROM expiryctl.dead_letters
                       WHERE dead_lettered_at < cutoff AND redacted_at IS NULL AND status <> 'in_request'
                       ORDER BY id LIMIT greatest(batch, 1) FOR UPDATE SKIP LOCKED)
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM redacted;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_request_create freezes a new request. Nothing of the cohort comes
-- from the client: the database resolves the selection, hashes each
-- payload as stored, numbers the items, counts them and hashes the cohort
-- (sha256 over each item's big-endian id and payload hash, in run order).
CREATE OR REPLACE FUNCTION expiryctl.replay_request_create(
    actor text, kind text, selection jsonb, rate numeric, canary integer,
    to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean)
RETURNS TABLE (request_id bigint, matched integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    pol expiryctl.policy%ROWTYPE;
    ids bigint[];
    wanted bigint[];
    bound integer;
    n integer;
    found_n integer;
    bad text;
    eff_rate numeric;
    eff_canary integer;
    rid bigint;
    chash bytea;
BEGIN
    PERFORM expiryctl.require_role('replay request', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    IF kind NOT IN ('replay', 'discard') THEN
        PERFORM expiryctl.replay_refuse('kind', format('unknown request kind %L: replay or discard', kind));
    END IF;
    IF coalesce(btrim(why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why: --why names the incident or ticket');
    END IF;
    IF fresh_key AND NOT confirm_eligible THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a fresh idempotency key needs --confirm-eligible: confirm the reservations are still eligible to expire');
    END IF;
    IF fresh_key AND kind = 'discard' THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a discard does not publish, so --fresh-key does not apply');
    END IF;
    PERFORM expiryctl.replay_expire_stale(actor);
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton FOR SHARE;

    SELECT coalesce(array_agg(x::bigint ORDER BY ord), '{}') INTO wanted
      FROM jsonb_array_elements_text(coalesce(selection->'ids', '[]')) WITH ORDINALITY AS t(x, ord);
    bound := nullif(selection->>'max', '')::integer;
    IF cardinality(wanted) = 0 AND coalesce(bound, 0) <= 0 THEN
        PERFORM expiryctl.replay_refuse('bounded-cohort', 'a filter needs --max N: a request is bounded');
    END IF;
    eff_rate := coalesce(nullif(rate, 0), pol.max_rate);
    IF eff_rate > pol.max_rate THEN
        PERFORM expiryctl.replay_refuse('max-rate', format('rate %s/s is above the policy maximum of %s/s: lower --rate', eff_rate, pol.max_rate));
    END IF;
    IF bound > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('--max %s is above the policy maximum of %s letters per request', bound, pol.max_cohort));
    END IF;
    IF cardinality(wanted) > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('%s ids is above the policy maximum of %s letters per request', cardinality(wanted), pol.max_cohort));
    END IF;

    CREATE TEMP TABLE IF NOT EXISTS pg_temp.replay_cohort (
        ordinal integer, id bigint, status text, payload_sha256 bytea, stored_sha256 bytea,
        has_target boolean, redacted boolean) ON COMMIT DROP;
    TRUNCATE pg_temp.replay_cohort;
    IF cardinality(wanted) > 0 THEN
        INSERT INTO pg_temp.replay_cohort
        SELECT (row_number() OVER (ORDER BY d.id))::integer - 1, d.id, d.status, sha256(d.payload), d.payload_sha256,
               d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL OR d.origin_queue IS NOT NULL,
               d.redacted_at IS NOT NULL
          FROM (SELECT * FROM expiryctl.dead_letters WHERE id = ANY (wanted) ORDER BY id FOR UPDATE) d;
        SELECT count(*) INTO found_n FROM pg_temp.replay_cohort;
        IF found_n < (SELECT count(DISTINCT x) FROM unnest(wanted) x) THEN
            SELECT min(x) INTO rid FROM unnest(wanted) x WHERE x NOT IN (SELECT id FROM pg_temp.replay_cohort);
            RAISE EXCEPTION 'dead letter % not found: `expiryctl dlq list` shows the ids there are', rid
                USING ERRCODE = 'EG002', DETAIL = 'dead_letter:' || rid;
        END IF;
        matched := found_n;
    ELSE
        SELECT count(*) INTO matched FROM expiryctl.letters_matching(selection->'filter');
        INSERT INTO pg_temp.replay_cohort
        SELECT (row_number() OVER (ORDER BY m.dead_lettered_at, m.id))::integer - 1, m.id, m.status, sha256(m.payload),
               m.payload_sha256,
               m.original_exchange IS NOT NULL OR m.original_routing_key IS NOT NULL OR m.origin_queue IS NOT NULL,
               m.redacted_at IS NOT NULL
          FROM (SELECT d.* FROM expiryctl.letters_matching(selection->'filter') l
                  JOIN expiryctl.dead_letters d ON d.id = l.id
                 ORDER BY l.dead_lettered_at, l.id LIMIT bound FOR UPDATE OF d) m;
    END IF;
    SELECT count(*) INTO n FROM pg_temp.replay_cohort;
    IF n = 0 THEN
        PERFORM expiryctl.replay_refuse('empty-cohort', 'no dead letter waiting for a decision matches: check the filter with `expiryctl dlq list` (letters already replayed, discarded or in an open request are not eligible)');
    END IF;

    SELECT string_agg(id::text, ', ' ORDER BY id) INTO bad FROM pg_temp.replay_cohort WHERE redacted;
    IF bad IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('redacted', format('dead letters %s were redacted by retention: there is no payload left to replay', bad));
    END IF;
    SELECT string_agg(id::text, ', ' ORDER BY id) INTO bad FROM pg_temp.replay_cohort WHERE status = 'in_request';
    IF bad IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('one-open-request', format('dead letters %s are already in another open request: leave them out, or cancel that request first (`expiryctl replay list --status pending`)', bad));
    END IF;
    SELECT string_agg(id || ' (' || status || ')', ', ' ORDER BY id) INTO bad FROM pg_temp.replay_cohort WHERE status <> 'dead';
    IF bad IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('decided', format('dead letters %s were already decided and cannot join a request', bad));
    END IF;
    SELECT string_agg(id::text, ', ' ORDER BY id) INTO bad FROM pg_temp.replay_cohort WHERE payload_sha256 <> stored_sha256;
    IF bad IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letters %s no longer hash as they did when captured: their payload was changed outside expiryctl', bad));
    END IF;
    IF kind = 'replay' AND coalesce(to_exchange, '') = '' AND coalesce(to_routing_key, '') = '' THEN
        SELECT string_agg(id::text, ', ' ORDER BY id) INTO bad FROM pg_temp.replay_cohort WHERE NOT has_target;
        IF bad IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('target', format('dead letters %s name no origin (no x-original-exchange, no x-death queue): add --to-exchange and --routing-key', bad));
        END IF;
    END IF;

    eff_canary := CASE WHEN kind = 'replay' THEN greatest(1, n / 10) ELSE 0 END;
    IF canary IS NOT NULL THEN
        eff_canary := least(greatest(canary, 0), n);
    END IF;
    SELECT sha256(string_agg(int8send(c.id) || c.payload_sha256, ''::bytea ORDER BY c.ordinal)), array_agg(c.id ORDER BY c.ordinal)
      INTO chash, ids FROM pg_temp.replay_cohort c;

    INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash, rate, canary, stop_failure_ratio,
        stop_queue_depth, stop_redead_ratio, canary_window, fresh_key, eligibility_confirmed, to_exchange,
        to_routing_key, why, requested_by, expires_at)
    VALUES (kind, selection, n, chash, eff_rate, eff_canary, pol.stop_failure_ratio, pol.stop_queue_depth,
        pol.stop_redead_ratio, pol.canary_window, fresh_key, confirm_eligible, nullif(to_exchange, ''),
        nullif(to_routing_key, ''), why, label, now() + pol.approval_ttl)
    RETURNING id INTO rid;
    INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal)
    SELECT rid, c.id, c.payload_sha256, c.ordinal FROM pg_temp.replay_cohort c;
    UPDATE expiryctl.dead_letters SET status = 'in_request' WHERE id = ANY (ids);
    PERFORM expiryctl.audit_write(label, 'replay.request', 'replay_request:' || rid, jsonb_build_object(
        'kind', kind, 'selection', selection, 'matched', matched, 'items', to_jsonb(ids),
        'cohort_hash', encode(chash, 'hex'), 'rate', eff_rate, 'canary', eff_canary, 'fresh_key', fresh_key,
        'to_exchange', coalesce(to_exchange, ''), 'to_routing_key', coalesce(to_routing_key, ''), 'why', why));
    request_id := rid;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_review approves or rejects a request. An approval names the cohort
-- hash the approver was shown: a request whose hash differs is refused.
CREATE OR REPLACE FUNCTION expiryctl.replay_review(
    actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea)
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
        RAISE EXCEPTION 'replay request % not found: `expiryctl replay list` shows the requests there are', request
            USING ERRCODE = 'EG002', DETAIL = 'replay_request:' || request;
    END IF;
    IF decision = 'reject' AND coalesce(btrim(why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why you reject it: --why');
    END IF;
    IF req.status NOT IN ('pending', 'halted') THEN
        PERFORM expiryctl.replay_refuse('single-review', format('replay request %s is %s: it was already reviewed%s',
            request, req.status, coalesce(' by ' || req.reviewed_by, '')));
    END IF;
    UPDATE expiryctl.replay_requests
       SET status = CASE WHEN decision = 'approve' THEN 'approved' ELSE 'rejected' END,
           reviewed_by = label, review_why = nullif(why, '')
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
        'requested_db_role', after.requested_db_role, 'approval_expires_at', after.approval_expires_at));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
BEGIN
    PERFORM expiryctl.require_role('replay cancel', 'expiryctl_operator', 'expiryctl_approver');
    label := expiryctl.actor_label(actor);
    UPDATE expiryctl.replay_requests SET status = 'cancelled', halt_reason = 'cancelled by ' || label WHERE id = request;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replay request % not found: `expiryctl replay list` shows the requests there are', request
            USING ERRCODE = 'EG002', DETAIL = 'replay_request:' || request;
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || request,
                                  jsonb_build_object('why', coalesce(why, '')));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_run_start moves an approved request to running (spending the
-- approval) or takes over a running one whose runner is gone. Returns
-- whether it resumed and the label the run records.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_start(actor text, request bigint)
RETURNS TABLE (resumed boolean, label text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    states jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replay request % not found: `expiryctl replay list` shows the requests there are', request
            USING ERRCODE = 'EG002', DETAIL = 'replay_request:' || request;
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    CASE req.status
    WHEN 'approved' THEN
        UPDATE expiryctl.replay_requests SET status = 'running', started_db_role = session_user WHERE id = request
        RETURNING * INTO req;
        resumed := false;
    WHEN 'running' THEN
        resumed := true;
    WHEN 'pending' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is pending approval: ask an approver to run `expiryctl replay approve %s`', request, request));
    WHEN 'halted' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s was halted (%s): it needs a new approval before it runs again: ask an approver to run `expiryctl replay approve %s`',
            request, req.halt_reason, request));
    ELSE
        PERFORM expiryctl.replay_refuse('terminal', format(
            'replay request %s is %s: it is over and cannot run; make a new request with `expiryctl replay request`', request, req.status));
    END CASE;
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO states
      FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items WHERE request_id = request GROUP BY state) s;
    PERFORM expiryctl.audit_write(label, 'replay.run.start', 'replay_request:' || request, jsonb_build_object(
        'resume', resumed, 'approval', req.approvals, 'approved_by', req.reviewed_by,
        'approved_db_role', req.reviewed_db_role, 'kind', req.kind, 'items', req.item_count, 'states', states,
        'rate', req.rate, 'canary', req.canary, 'fresh_key', req.fresh_key,
        'stop_conditions', jsonb_build_object('failure_ratio', req.stop_failure_ratio, 'queue_depth', req.stop_queue_depth,
            'redead_ratio', req.stop_redead_ratio, 'canary_window', extract(epoch FROM req.canary_window) * 1e9)));
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- policy_review applies (approve) or drops (reject) a pending proposal; the
-- reviewer's login must differ from the proposer's.
CREATE OR REPLACE FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    c expiryctl.policy_changes%ROWTYPE;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy ' || decision, 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT * INTO c FROM expiryctl.policy_changes WHERE id = change FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'policy change % not found: `expiryctl policy show` lists the pending ones', change
            USING ERRCODE = 'EG002', DETAIL = 'policy_change:' || change;
    END IF;
    IF c.status <> 'pending' THEN
        PERFORM expiryctl.replay_refuse('single-review', format('policy change %s is %s: it was already reviewed by %s',
            change, c.status, coalesce(c.reviewed_by, 'nobody')));
    END IF;
    IF c.proposed_db_role = session_user THEN
        PERFORM expiryctl.replay_refuse('four-eyes', format(
            'the login %s proposed policy change %s and cannot review it, whatever --actor says: another admin must', session_user, change));
    END IF;
    IF decision = 'approve' THEN
        SELECT * INTO r FROM expiryctl.policy_apply(c.changes, label);
        UPDATE expiryctl.policy_changes SET status = 'applied', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.approve', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'proposed_db_role', c.proposed_db_role,
            'why', coalesce(why, ''), 'before', r.before, 'after', r.after));
    ELSIF decision = 'reject' THEN
        UPDATE expiryctl.policy_changes SET status = 'rejected', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.reject', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'why', coalesce(why, '')));
    ELSE
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
END
$$;
-- +goose StatementEnd

DROP FUNCTION expiryctl.not_found(text, bigint);
