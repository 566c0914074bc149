-- +goose Up
-- Issue 14: do not replay onto the worker that failed the letters, and do
-- not replay letters that cannot succeed.
--
-- A letter the worker dead-letters names its handler version in
-- x-handler-version, and a consumer advertises its own as handler-version
-- in its AMQP connection properties (docs/message-contract.md). The
-- request freezes the versions its cohort failed under (failed_under, a
-- version -> letters object, "" for letters that name none) and the
-- targets its letters are published to (targets), computed once from the
-- cohort's headers as replay_request_create reads them; the archive keeps
-- the headers as received, so no column or index of dead_letters is
-- needed: the cohort's aggregate is read once, by id, when it is frozen,
-- in the pass that already hashes every payload.
--
-- The database cannot see the broker. The runner reads the consumers of
-- the queues the targets route to from RabbitMQ's management API and
-- hands what it saw to replay_run_start, which refuses (rules no-consumer,
-- same-handler, handler-unverified) unless the request says
-- same_handler_ok with a reason. A caller with its own login can lie about
-- what it saw; it cannot skip the check, nor set the flag after the
-- request was frozen (docs/governance.md).
ALTER TABLE expiryctl.replay_requests
    ADD COLUMN same_handler_ok   boolean NOT NULL DEFAULT false,
    ADD COLUMN same_handler_why  text,
    ADD COLUMN include_permanent boolean NOT NULL DEFAULT false,
    ADD COLUMN failed_under      jsonb   NOT NULL DEFAULT '{}',
    ADD COLUMN targets           jsonb   NOT NULL DEFAULT '[]',
    ADD CONSTRAINT replay_requests_same_handler_why
        CHECK (NOT same_handler_ok OR length(btrim(coalesce(same_handler_why, ''))) > 0);
COMMENT ON COLUMN expiryctl.replay_requests.same_handler_ok IS
    'The requester says the handler version that failed the cohort may take it again (with same_handler_why); set only by replay_request_create';
COMMENT ON COLUMN expiryctl.replay_requests.include_permanent IS
    'The requester includes letters that failed for good (conflict, validation, malformed, not-found); set only by replay_request_create';
COMMENT ON COLUMN expiryctl.replay_requests.failed_under IS
    'Letters of the cohort per x-handler-version ("" for none), frozen with the cohort';
COMMENT ON COLUMN expiryctl.replay_requests.targets IS
    'Where the cohort''s letters are published: [{exchange, routing_key, letters}], the 20 largest, frozen with the cohort';

-- +goose StatementBegin
-- permanent_categories are the reason categories a retry cannot fix: the
-- job's data is wrong or gone, or its version moved on.
CREATE FUNCTION expiryctl.permanent_categories() RETURNS text[]
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY['conflict', 'validation', 'malformed', 'not-found']
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- handler_version_of reads x-handler-version from headers as the archive
-- encodes them (deadletter.EncodeHeaders): a string as it is, a byte array
-- or a string that is not UTF-8 escaped; "" when there is none.
CREATE FUNCTION expiryctl.handler_version_of(headers jsonb) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT left(CASE jsonb_typeof(headers->'x-handler-version')
        WHEN 'string' THEN headers->>'x-handler-version'
        WHEN 'object' THEN coalesce(encode(decode(coalesce(headers->'x-handler-version'->>'$bytes',
                                                           headers->'x-handler-version'->>'$string'), 'base64'), 'escape'), '')
        ELSE '' END, 200)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_target_of is where a replay publishes a letter, as the runner
-- decides it (replay's runItem.target): its original exchange and routing
-- key, else the queue it died in by the default exchange, else the
-- request's target. rk is NULL when there is none.
CREATE FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text,
    to_exchange text, to_routing_key text, OUT e text, OUT rk text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN original_exchange IS NOT NULL OR original_routing_key IS NOT NULL THEN coalesce(original_exchange, '')
                WHEN coalesce(origin_queue, '') <> '' THEN ''
                WHEN coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' THEN coalesce(to_exchange, '') END,
           CASE WHEN original_exchange IS NOT NULL OR original_routing_key IS NOT NULL THEN coalesce(original_routing_key, '')
                WHEN coalesce(origin_queue, '') <> '' THEN origin_queue
                WHEN coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' THEN coalesce(to_routing_key, '') END
$$;
-- +goose StatementEnd

-- The requests made before this migration: their cohorts' versions and
-- targets, as replay_request_create would have frozen them. The guard
-- trigger lets these columns change; the trigger below, made after, does not.
-- Rows that break four_eyes_login (00009 added it NOT VALID: self-reviews
-- from before the groups) cannot be updated at all; they are long over.
UPDATE expiryctl.replay_requests r
   SET failed_under = coalesce((SELECT jsonb_object_agg(v, k) FROM (
           SELECT expiryctl.handler_version_of(d.headers) AS v, count(*) AS k
             FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
            WHERE i.request_id = r.id GROUP BY 1) s), '{}'),
       targets = coalesce((SELECT jsonb_agg(jsonb_build_object('exchange', e, 'routing_key', rk, 'letters', k) ORDER BY k DESC, e, rk) FROM (
           SELECT t.e, t.rk, count(*) AS k
             FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
            CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue,
                                                                         r.to_exchange, r.to_routing_key)) t
            WHERE i.request_id = r.id AND t.rk IS NOT NULL
            GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 20) s), '[]')
 WHERE r.reviewed_db_role IS NULL OR r.reviewed_db_role <> r.requested_db_role;

-- +goose StatementBegin
-- replay_requests_handler_frozen keeps what replay_request_create set of a
-- request's handler and permanent-letter flags as it set them, whoever
-- updates the row (the guard trigger of 00009 freezes the older columns).
CREATE FUNCTION expiryctl.replay_requests_handler_frozen() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('frozen-request', format(
        'replay request %s is frozen: --same-handler-ok, its reason, --include-permanent and the versions and targets of its cohort are set when it is requested and never change; make a new request',
        OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();

-- +goose StatementBegin
-- replay_handler_check refuses a replay's start when the consumers the
-- runner observed cannot be shown to run a handler other than the one the
-- cohort failed under. consumers is
--   {"queues": [{"queue": Q, "consumers": [{"tag": T, "connection": C, "handler_version": V}]}],
--    "unavailable": WHY}
-- with "unavailable" set when the runner could not read them, and a queue
-- for each queue the cohort's targets route to. Over all their consumers:
-- none at all is no-consumer; none advertising a version the cohort did
-- not fail under is same-handler (a consumer that advertises none proves
-- nothing). A queue without a consumer beside one with the fix (an audit
-- tap bound to the same key) is no reason to refuse. replay's
-- HandlerVerdict judges a run's later checks the same way.
CREATE FUNCTION expiryctl.replay_handler_check(request bigint, failed_under jsonb, consumers jsonb) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    running text;
    queues text;
    hint text := 'or, if replaying onto the same handler is what you mean, make a new request with --same-handler-ok "why"';
BEGIN
    IF consumers IS NULL OR jsonb_typeof(consumers) <> 'object' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: the runner did not say which consumers its queues have, so nothing shows that the handler changed since the cohort failed: '
            || 'run it with `expiryctl replay run %s`, which reads them from RabbitMQ''s management API, %s', request, request, hint));
    END IF;
    IF coalesce(consumers->>'unavailable', '') <> '' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: cannot read the consumers of its queues (%s), so nothing shows that the handler changed since the cohort failed: '
            || 'fix --management-url / EXPIRYCTL_MANAGEMENT_URL and run it again, %s', request, left(consumers->>'unavailable', 500), hint));
    END IF;
    IF jsonb_typeof(consumers->'queues') IS DISTINCT FROM 'array' OR jsonb_array_length(consumers->'queues') = 0 THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: its targets route to no queue, so no consumer would take the replayed jobs: check the bindings, %s', request, hint));
    END IF;
    SELECT string_agg(q->>'queue', ', ') INTO queues FROM jsonb_array_elements(consumers->'queues') q;
    SELECT string_agg(DISTINCT CASE WHEN coalesce(c->>'handler_version', '') = '' THEN '(none advertised)' ELSE c->>'handler_version' END, ', ')
      INTO running
      FROM jsonb_array_elements(consumers->'queues') q
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c;
    IF running IS NULL THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: queue %s has no consumer, so nothing would take the replayed jobs: start the fixed worker first, %s',
            request, queues, hint));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(consumers->'queues') q
                    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c
                    WHERE coalesce(c->>'handler_version', '') <> '' AND NOT (failed_under ? (c->>'handler_version'))) THEN
        SELECT string_agg(CASE WHEN key = '' THEN '(none named)' ELSE key END || ': ' || value || ' letters', ', ' ORDER BY key)
          INTO failed FROM jsonb_each_text(failed_under);
        PERFORM expiryctl.replay_refuse('same-handler', format(
            'replay request %s: every consumer of queue %s runs a handler version the cohort failed under, or advertises none (consumed now by %s; failed under %s): '
            || 'replaying now repeats the failure. Deploy the fix (a worker whose connection advertises a new handler-version) and run it again, %s',
            request, queues, running, coalesce(failed, 'nothing'), hint));
    END IF;
END
$$;
-- +goose StatementEnd

DROP FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean);
-- +goose StatementBegin
-- replay_request_create freezes a new request, as 00009's did, and now also
-- refuses letters not worth retrying (rule permanent-letters) unless the
-- requester says include_permanent, takes the requester's word that the
-- handler that failed the letters may take them again (same_handler_ok,
-- with a reason), and freezes the handler versions the cohort failed under
-- and the targets its letters are published to.
CREATE FUNCTION expiryctl.replay_request_create(
    actor text, kind text, selection jsonb, rate numeric, canary integer,
    to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean,
    same_handler_ok boolean DEFAULT false, same_handler_why text DEFAULT NULL, include_permanent boolean DEFAULT false)
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
    perm_n integer;
    perm_ids text;
    perm_cats text;
    failed jsonb;
    tgts jsonb;
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
    IF same_handler_ok AND coalesce(btrim(same_handler_why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('same-handler', 'say why the handler that failed these letters may take them again: --same-handler-ok "why"');
    END IF;
    IF kind = 'discard' AND (same_handler_ok OR include_permanent) THEN
        PERFORM expiryctl.replay_refuse('kind', 'a discard publishes nothing, so --same-handler-ok and --include-permanent do not apply');
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
               AND d.original_routing_key IS NULL AND d.origin_queue IS NULL),
           count(*) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())),
           array_to_string((array_agg(d.id ORDER BY d.id) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())))[1:10], ', ')
      INTO bad_redacted, bad_taken, bad_decided, bad_changed, bad_target, perm_n, perm_ids
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

    IF kind = 'replay' AND perm_n > 0 AND NOT include_permanent THEN
        SELECT string_agg(cat || ' ' || k, ', ' ORDER BY cat) INTO perm_cats
          FROM (SELECT d.reason_category AS cat, count(*) AS k FROM unnest(c_ids) AS c(id)
                  JOIN expiryctl.dead_letters d ON d.id = c.id
                 WHERE d.reason_category = ANY (expiryctl.permanent_categories()) GROUP BY 1) s;
        PERFORM expiryctl.replay_refuse('permanent-letters', format(
            '%s of the %s letters failed for good (%s: dead letters %s%s): a retry fails the same way. Leave them out (for instance --reason transient-exhausted), '
            || 'ask for them to be discarded with `expiryctl dlq discard` (a second person approves), or, if a fix makes them worth retrying, add --include-permanent',
            perm_n, n, perm_cats, perm_ids, CASE WHEN perm_n > 10 THEN ', …' ELSE '' END));
    END IF;

    -- The handler versions the cohort failed under, and where its letters
    -- go, frozen with it: replay_run_start judges the consumers the runner
    -- observed against them, and the approver sees both. One more read of
    -- the cohort's letters by id, grouped once for both.
    WITH g AS (
        SELECT expiryctl.handler_version_of(d.headers) AS v, t.e, t.rk, count(*) AS k
          FROM unnest(c_ids) AS c(id) JOIN expiryctl.dead_letters d ON d.id = c.id
         CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue,
                                                                      to_exchange, to_routing_key)) t
         GROUP BY 1, 2, 3)
    SELECT (SELECT coalesce(jsonb_object_agg(v, k), '{}') FROM (SELECT v, sum(k)::bigint AS k FROM g GROUP BY v) a),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('exchange', e, 'routing_key', rk, 'letters', k) ORDER BY k DESC, e, rk), '[]')
              FROM (SELECT e, rk, sum(k)::bigint AS k FROM g WHERE rk IS NOT NULL GROUP BY e, rk ORDER BY 3 DESC, 1, 2 LIMIT 20) b)
      INTO failed, tgts;

    eff_canary := CASE WHEN kind = 'replay' THEN greatest(1, n / 10) ELSE 0 END;
    IF canary IS NOT NULL THEN
        eff_canary := least(greatest(canary, 0), n);
    END IF;
    SELECT sha256(string_agg(int8send(c.id) || c.h, ''::bytea ORDER BY c.ord)) INTO chash
      FROM unnest(c_ids, c_hashes) WITH ORDINALITY AS c(id, h, ord);

    INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash, rate, canary, stop_failure_ratio,
        stop_queue_depth, stop_redead_ratio, canary_window, fresh_key, eligibility_confirmed, to_exchange,
        to_routing_key, why, requested_by, expires_at, same_handler_ok, same_handler_why, include_permanent,
        failed_under, targets)
    VALUES (kind, selection, n, chash, eff_rate, eff_canary, pol.stop_failure_ratio, pol.stop_queue_depth,
        pol.stop_redead_ratio, pol.canary_window, fresh_key, confirm_eligible, nullif(to_exchange, ''),
        nullif(to_routing_key, ''), why, label, now() + pol.approval_ttl, same_handler_ok,
        CASE WHEN same_handler_ok THEN same_handler_why END, include_permanent, failed, tgts)
    RETURNING id INTO rid;
    INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal)
    SELECT rid, c.id, c.h, (c.ord - 1)::integer FROM unnest(c_ids, c_hashes) WITH ORDINALITY AS c(id, h, ord);
    UPDATE expiryctl.dead_letters SET status = 'in_request' WHERE id = ANY (c_ids);
    PERFORM expiryctl.audit_write(label, 'replay.request', 'replay_request:' || rid, jsonb_build_object(
        'kind', kind, 'selection', selection, 'matched', matched, 'items', to_jsonb(c_ids),
        'cohort_hash', encode(chash, 'hex'), 'rate', eff_rate, 'canary', eff_canary, 'fresh_key', fresh_key,
        'to_exchange', coalesce(to_exchange, ''), 'to_routing_key', coalesce(to_routing_key, ''), 'why', why,
        'same_handler_ok', same_handler_ok, 'same_handler_why', CASE WHEN same_handler_ok THEN same_handler_why ELSE '' END,
        'include_permanent', include_permanent, 'permanent_letters', perm_n, 'failed_under', failed, 'targets', tgts));
    request_id := rid;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

DROP FUNCTION expiryctl.replay_run_start(text, bigint);
-- +goose StatementBegin
-- replay_run_start moves an approved request to running (spending the
-- approval) or takes over a running one whose runner is gone, as 00009's
-- did, once a replay's handler check passes: consumers is what the runner
-- observed on the queues the cohort's targets route to (see
-- replay_handler_check), recorded on the run's audit row. Returns whether
-- it resumed and the label the run records.
CREATE FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb DEFAULT NULL)
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
    IF req.kind = 'replay' AND req.status IN ('approved', 'running') AND NOT req.same_handler_ok THEN
        PERFORM expiryctl.replay_handler_check(request, req.failed_under, consumers);
    END IF;
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
        'same_handler_ok', req.same_handler_ok, 'failed_under', req.failed_under, 'consumers', consumers,
        'stop_conditions', jsonb_build_object('failure_ratio', req.stop_failure_ratio, 'queue_depth', req.stop_queue_depth,
            'redead_ratio', req.stop_redead_ratio, 'canary_window_seconds', extract(epoch FROM req.canary_window))));
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean,
        boolean, text, boolean),
    expiryctl.replay_run_start(text, bigint, jsonb), expiryctl.replay_handler_check(bigint, jsonb, jsonb),
    expiryctl.permanent_categories(), expiryctl.handler_version_of(jsonb),
    expiryctl.replay_target_of(text, text, text, text, text), expiryctl.replay_requests_handler_frozen() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean,
        boolean, text, boolean),
    expiryctl.replay_run_start(text, bigint, jsonb) TO expiryctl_operator;

-- +goose Down
DROP FUNCTION expiryctl.replay_run_start(text, bigint, jsonb);
DROP FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean,
    boolean, text, boolean);
-- +goose StatementBegin
-- replay_request_create freezes a new request. Nothing of the cohort comes
-- from the client: the database resolves the selection, hashes each
-- payload as stored, numbers the items, counts them and hashes the cohort
-- (sha256 over each item's big-endian id and payload hash, in run order).
CREATE FUNCTION expiryctl.replay_request_create(
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
-- replay_run_start moves an approved request to running (spending the
-- approval) or takes over a running one whose runner is gone. Returns
-- whether it resumed and the label the run records.
CREATE FUNCTION expiryctl.replay_run_start(actor text, request bigint)
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

REVOKE EXECUTE ON FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean),
    expiryctl.replay_run_start(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean),
    expiryctl.replay_run_start(text, bigint) TO expiryctl_operator;
DROP FUNCTION expiryctl.replay_handler_check(bigint, jsonb, jsonb);
DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
DROP FUNCTION expiryctl.replay_requests_handler_frozen();
DROP FUNCTION expiryctl.replay_target_of(text, text, text, text, text);
DROP FUNCTION expiryctl.handler_version_of(jsonb);
DROP FUNCTION expiryctl.permanent_categories();
ALTER TABLE expiryctl.replay_requests
    DROP CONSTRAINT replay_requests_same_handler_why,
    DROP COLUMN targets,
    DROP COLUMN failed_under,
    DROP COLUMN include_permanent,
    DROP COLUMN same_handler_why,
    DROP COLUMN same_handler_ok;
