-- replay_request_create is `replay request` and `dlq discard`: it freezes
-- a cohort and records the request, pending approval. The database picks
-- the letters (by ids or by the selection, see letters_matching), refuses
-- a cohort over the policy's bound, a rate of 0 or less or over the
-- policy's ceiling (a NULL rate is the ceiling), a letter
-- already in an open request, redacted or decided, and, for a replay,
-- letters of permanent categories without include_permanent, a
-- not_before in the past or past the letters' retention, unless
-- include_not_due a letter whose Retry-After it cannot read or whose hold
-- or Retry-After falls past its retention, and, unless same_handler_ok,
-- letters of a system that shows nobody consuming its queues (its
-- queue_systems.consumers_unseen says why); it freezes each letter's
-- Retry-After with the item (retry_after_of); it hashes
-- every payload it freezes and the cohort, so that the approver approves
-- the server's hash and not the client's word. Returns the request's id
-- and how many letters the selection matched.
CREATE OR REPLACE FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean DEFAULT false, same_handler_why text DEFAULT NULL::text, include_permanent boolean DEFAULT false, via_exchange boolean DEFAULT false, not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, include_not_due boolean DEFAULT false, unwatched_why text DEFAULT NULL::text) RETURNS TABLE(request_id bigint, matched integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    pol expiryctl.policy%ROWTYPE;
    wanted bigint[];
    c_ids bigint[];
    c_hashes bytea[];
    c_retry timestamptz[];
    bad_retry text[];
    late_ids text[];
    oldest timestamptz;
    bound integer;
    n integer;
    bad_redacted text[];
    bad_taken text[];
    bad_decided text[];
    bad_changed text[];
    bad_target text[];
    sqs_misrouted text[];
    systems integer;
    system_names text;
    unseen text;
    publish_connections text;
    sqs_untargeted text[];
    jobs_misrouted text[];
    perm_n integer;
    perm_ids text[];
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
    IF coalesce(why, '') !~ '\S' THEN
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
    IF rate <= 0 THEN
        PERFORM expiryctl.replay_refuse('max-rate', format('rate %s/s would never send: ask for a rate above 0, or none for the policy maximum of %s/s', rate, pol.max_rate));
    END IF;
    eff_rate := coalesce(rate, pol.max_rate);
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

    SELECT array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.redacted_at IS NOT NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE s.status = 'in_request'),
           array_agg(d.id || ' (' || s.status || ')' ORDER BY d.id) FILTER (WHERE s.status <> 'dead'),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.payload_sha256 <> c.h),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE t.rk IS NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.source_system = 'sqs' AND t.rk IS NOT NULL
                                                        AND (t.rk NOT LIKE 'arn:aws:sqs:%' OR t.e <> '')),
           count(DISTINCT d.source_system), string_agg(DISTINCT d.source_system, ', ' ORDER BY d.source_system),
           CASE WHEN count(DISTINCT d.connection) FILTER (WHERE NOT q.retries_in_place) > 1
                THEN string_agg(DISTINCT d.connection, ', ') FILTER (WHERE NOT q.retries_in_place) END,
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.source_system = 'sqs' AND t.rk IS NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE q.retries_in_place
                                                        AND (coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' OR via_exchange OR fresh_key)),
           count(*) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())),
           (array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())))[1:10]
      INTO bad_redacted, bad_taken, bad_decided, bad_changed, bad_target, sqs_misrouted, systems, system_names, publish_connections, sqs_untargeted, jobs_misrouted, perm_n, perm_ids
      FROM unnest(c_ids, c_hashes) AS c(id, h) JOIN expiryctl.dead_letters d ON d.id = c.id
      JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = c.id
      LEFT JOIN expiryctl.queue_systems q ON q.name = d.source_system
     CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                                  to_exchange, to_routing_key, via_exchange)) t;
    IF bad_redacted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('redacted', format('%s redacted by retention: there is no payload left to replay', expiryctl.letters_named(bad_redacted, 'was', 'were')));
    END IF;
    IF bad_taken IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('one-open-request', format('%s already in another open request: leave %s out, or cancel that request first (`expiryctl replay list --status pending`)', expiryctl.letters_named(bad_taken, 'is', 'are'), expiryctl.count_word(cardinality(bad_taken), 'it', 'them')));
    END IF;
    IF bad_decided IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('decided', format('%s already decided and cannot join a request', expiryctl.letters_named(bad_decided, 'was', 'were')));
    END IF;
    IF bad_changed IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('%s when captured: the payload was changed outside expiryctl', expiryctl.letters_named(bad_changed, 'no longer hashes as it did', 'no longer hash as they did')));
    END IF;
    -- A run publishes to one system, the one its letters came from: a
    -- letter goes back to a queue of the system it died in.
    IF kind = 'replay' AND systems > 1 THEN
        PERFORM expiryctl.replay_refuse('system', format('the letters come from more than one queue system (%s): a replay goes back to one; request each system''s letters apart (`expiryctl dlq list` shows each letter''s system)', system_names));
    END IF;
    -- A publishing run (of a system that does not retry in place) reaches
    -- one broker: the connection its letters came from, which the runner's
    -- configuration resolves by name.
    IF kind = 'replay' AND publish_connections IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('connection', format('the letters come from more than one connection (%s): a replay publishes through one; '
            || 'request each connection''s letters apart (`expiryctl dlq show ID` names a letter''s connection)', publish_connections));
    END IF;
    -- A job store keeps the failed job: a replay retries that job, with its
    -- own payload, in the queue it failed in, and sends no copy anywhere.
    -- The cohort is of one system here.
    IF kind = 'replay' AND jobs_misrouted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse(CASE WHEN fresh_key THEN 'fresh-key' ELSE 'target' END, format('%s of a job store (%s), which a replay retries in place, '
            || 'with the payload the store holds: --to-exchange, --routing-key, --via-exchange and --fresh-key do not apply', expiryctl.letters_named(jobs_misrouted, 'is a job', 'are jobs'), system_names));
    END IF;
    -- SQS's own rules: a letter of SQS goes back to an SQS queue, which it
    -- names by its ARN, and SQS says which queue a letter came from only
    -- in some cases; each refusal says how to name the queue.
    IF kind = 'replay' AND sqs_untargeted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s captured from SQS with no word of the queue it came from (SQS says it only of a letter its redrive moved, '
            || 'as DeadLetterQueueSourceArn, or when one queue alone redrives to the DLQ): name that queue with --routing-key arn:aws:sqs:REGION:ACCOUNT:NAME', expiryctl.letters_named(sqs_untargeted, 'was', 'were')));
    END IF;
    IF kind = 'replay' AND sqs_misrouted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s captured from SQS, and a letter of SQS goes back to an SQS queue, named by its ARN: '
            || '--routing-key arn:aws:sqs:REGION:ACCOUNT:NAME; --to-exchange and --via-exchange are RabbitMQ''s', expiryctl.letters_named(sqs_misrouted, 'was', 'were')));
    END IF;
    IF kind = 'replay' AND bad_target IS NOT NULL AND via_exchange THEN
        PERFORM expiryctl.replay_refuse('target', format('%s no origin (no x-original-exchange, no x-death queue): add --to-exchange and --routing-key', expiryctl.letters_named(bad_target, 'names', 'name')));
    END IF;
    IF kind = 'replay' AND bad_target IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s no queue it failed in (no x-death), so a replay cannot go back to that queue alone: '
            || 'name it with --routing-key QUEUE, or add --via-exchange to publish through the original exchange, where every queue bound to it gets a copy', expiryctl.letters_named(bad_target, 'names', 'name')));
    END IF;
    IF kind = 'discard' AND (via_exchange OR not_before IS NOT NULL OR include_not_due OR unwatched_why IS NOT NULL) THEN
        PERFORM expiryctl.replay_refuse('kind', 'a discard publishes nothing, so --via-exchange, --not-before, --include-not-due and --unwatched do not apply');
    END IF;
    IF unwatched_why IS NOT NULL AND btrim(unwatched_why) = '' THEN
        PERFORM expiryctl.replay_refuse('dlq-unwatched', 'say why the run need not see its jobs die again: --unwatched "why" (for example: a `dlq ingest --follow` of another site captures them)');
    END IF;

    IF kind = 'replay' AND perm_n > 0 AND NOT include_permanent THEN
        SELECT string_agg(cat || ' ' || k, ', ' ORDER BY cat) INTO perm_cats
          FROM (SELECT d.reason_category AS cat, count(*) AS k FROM unnest(c_ids) AS c(id)
                  JOIN expiryctl.dead_letters d ON d.id = c.id
                 WHERE d.reason_category = ANY (expiryctl.permanent_categories()) GROUP BY 1) s;
        PERFORM expiryctl.replay_refuse('permanent-letters', format(
            '%1$s failed for good (%2$s: %3$s%4$s): a retry fails the same way. Leave %5$s out (for instance --reason transient-exhausted), '
            || 'ask for %5$s to be discarded with `expiryctl dlq discard` (a second person approves), or, if a fix makes %5$s worth retrying, add --include-permanent',
            expiryctl.count_word(n, 'the letter', format('%s of the %s letters', perm_n, n)), perm_cats, expiryctl.letters_named(perm_ids, '', ''),
            CASE WHEN perm_n > 10 THEN ', …' ELSE '' END, expiryctl.count_word(perm_n, 'it', 'them')));
    END IF;

    -- Time: no replay is scheduled into the past, or to after retention
    -- redacts its letters (from their capture, as dlq purge counts it);
    -- the Retry-After each letter's last error carried is frozen with its
    -- item, and one that cannot be read is refused rather than guessed.
    IF not_before IS NOT NULL AND not_before < now() THEN
        PERFORM expiryctl.replay_refuse('not-before', format('--not-before %s is in the past (the database''s clock says %s): name a later time, or leave it out to replay when the run starts',
            to_char(not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
    END IF;
    SELECT array_agg(expiryctl.retry_after_of(d.headers, d.dead_lettered_at) ORDER BY c.ord), min(d.ingested_at)
      INTO c_retry, oldest
      FROM unnest(c_ids) WITH ORDINALITY AS c(id, ord) JOIN expiryctl.dead_letters d ON d.id = c.id;
    IF not_before IS NOT NULL AND not_before > oldest + pol.retention THEN
        PERFORM expiryctl.replay_refuse('not-before', format('--not-before %s is after retention redacts the oldest letter of the cohort (captured %s, retention %s): name an earlier time',
            to_char(not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), to_char(oldest AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), pol.retention));
    END IF;
    IF kind = 'replay' AND NOT include_not_due THEN
        SELECT array_agg(format('%s (%s)', d.id, left(coalesce(d.headers->>'x-retry-after', d.headers->>'retry-after', d.headers->>'Retry-After', '?'), 40)) ORDER BY d.id)
                   FILTER (WHERE c.r = 'infinity'),
               array_agg(d.id::text ORDER BY d.id)
                   FILTER (WHERE c.r IS DISTINCT FROM 'infinity' AND greatest(c.r, d.due_at) > d.ingested_at + pol.retention)
          INTO bad_retry, late_ids
          FROM unnest(c_ids, c_retry) AS c(id, r) JOIN expiryctl.dead_letters d ON d.id = c.id;
        IF bad_retry IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('retry-after', format('%s a Retry-After that is neither seconds nor an HTTP date, so when it may go again is unknown: '
                || 'leave %s out, or add --include-not-due to publish without waiting', expiryctl.letters_named(bad_retry, 'carries', 'carry'), expiryctl.count_word(cardinality(bad_retry), 'it', 'them')));
        END IF;
        IF late_ids IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('not-before', format('%s not due (the hold''s deadline or Retry-After) until after retention redacts the letter: '
                || 'leave %s out, or add --include-not-due to publish without waiting', expiryctl.letters_named(late_ids, 'is', 'are'), expiryctl.count_word(cardinality(late_ids), 'it', 'them')));
        END IF;
    END IF;

    -- The handler check reads who consumes the targets, and a system that
    -- shows nobody (consumers_unseen says why: SQS, a job store whose
    -- workers take jobs without registering) leaves it nothing to read,
    -- so that a run would be refused after its approval
    -- (handler-unverified). The requester vouches for the handler now, and
    -- the approver reads the reason. The cohort is of one system here.
    IF kind = 'replay' AND same_handler_ok IS NOT TRUE THEN
        SELECT q.consumers_unseen INTO unseen FROM expiryctl.queue_systems q WHERE q.name = system_names;
        IF unseen IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('handler-unseen', format('%s, so nothing can tell whether a consumer runs a fixed handler: '
                || 'say why the handler is the same, --same-handler-ok "why" (docs/governance.md)', unseen));
        END IF;
    END IF;

    -- The handler versions the cohort failed under, and where its letters
    -- go, frozen with it: replay_run_start judges the consumers the runner
    -- observed against them, and the approver sees both. One more read of
    -- the cohort's letters by id, grouped once for both.
    -- A target names its system when it is not RabbitMQ's, and its
    -- connection when that is not the one called rabbitmq, so that a
    -- RabbitMQ request's statement reads as it did before there were two:
    -- a form the runner and approvers' signatures keep, not a rule of
    -- RabbitMQ's; every other system's targets name both.
    WITH g AS (
        SELECT expiryctl.handler_version_of(d.headers) AS v, t.e, t.rk, d.source_system AS sys, d.connection AS conn, count(*) AS k
          FROM unnest(c_ids) AS c(id) JOIN expiryctl.dead_letters d ON d.id = c.id
         CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                                      to_exchange, to_routing_key, via_exchange)) t
         GROUP BY 1, 2, 3, 4, 5)
    SELECT (SELECT coalesce(jsonb_object_agg(v, k), '{}') FROM (SELECT v, sum(k)::bigint AS k FROM g GROUP BY v) a),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('exchange', e, 'routing_key', rk, 'letters', k)
                                      || CASE WHEN sys <> 'rabbitmq' THEN jsonb_build_object('system', sys) ELSE '{}' END
                                      || CASE WHEN sys <> 'rabbitmq' OR conn <> 'rabbitmq' THEN jsonb_build_object('connection', conn) ELSE '{}' END
                                      ORDER BY k DESC, e, rk), '[]')
              FROM (SELECT e, rk, sys, conn, sum(k)::bigint AS k FROM g WHERE rk IS NOT NULL GROUP BY e, rk, sys, conn ORDER BY 5 DESC, 1, 2 LIMIT 20) b)
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
        failed_under, targets, via_exchange, not_before, include_not_due, unwatched_why)
    VALUES (kind, selection, n, chash, eff_rate, eff_canary, pol.stop_failure_ratio, pol.stop_queue_depth,
        pol.stop_redead_ratio, pol.canary_window, fresh_key, confirm_eligible, nullif(to_exchange, ''),
        nullif(to_routing_key, ''), why, label, now() + pol.approval_ttl, same_handler_ok,
        CASE WHEN same_handler_ok THEN same_handler_why END, include_permanent, failed, tgts, via_exchange, not_before,
        kind = 'replay' AND include_not_due, unwatched_why)
    RETURNING id INTO rid;
    INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal, retry_after)
    SELECT rid, c.id, c.h, (c.ord - 1)::integer, nullif(c.r, 'infinity')
      FROM unnest(c_ids, c_hashes, c_retry) WITH ORDINALITY AS c(id, h, r, ord);
    UPDATE expiryctl.dead_letter_states SET status = 'in_request' WHERE dead_letter_id = ANY (c_ids);
    PERFORM expiryctl.audit_write(label, 'replay.request', 'replay_request:' || rid, jsonb_build_object(
        'kind', kind, 'selection', selection, 'matched', matched, 'items', to_jsonb(c_ids),
        'cohort_hash', encode(chash, 'hex'), 'rate', eff_rate, 'canary', eff_canary, 'fresh_key', fresh_key,
        'to_exchange', coalesce(to_exchange, ''), 'to_routing_key', coalesce(to_routing_key, ''), 'why', why,
        'same_handler_ok', same_handler_ok, 'same_handler_why', CASE WHEN same_handler_ok THEN same_handler_why ELSE '' END,
        'include_permanent', include_permanent, 'permanent_letters', perm_n, 'failed_under', failed, 'targets', tgts,
        'via_exchange', via_exchange, 'not_before', not_before, 'include_not_due', include_not_due)
        || CASE WHEN unwatched_why IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('unwatched_why', unwatched_why) END);
    request_id := rid;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean, same_handler_why text, include_permanent boolean, via_exchange boolean, not_before timestamp with time zone, include_not_due boolean, unwatched_why text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean, same_handler_why text, include_permanent boolean, via_exchange boolean, not_before timestamp with time zone, include_not_due boolean, unwatched_why text) TO expiryctl_operator;
