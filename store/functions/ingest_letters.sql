-- ingest_letters stores one batch of captured letters and its audit row.
-- The payload's hash is the database's own; a copy whose fingerprint is
-- already archived is skipped; a letter of a job already archived links to
-- that job's latest row. A letter's claim to come back from a replay
-- request is kept only where that request published that job
-- (replay_published_job), or from the owner, whose word governance takes;
-- the batch's audit row counts the claims dropped. An ingester captures
-- any queue; an operator only the queues its run's cohort came from, while
-- the run holds its lease (replay_run_captures), and the audit row says
-- by_run. Each letter names its queue system, one of queue_systems (a
-- letter of a release before 00035, which names none, is RabbitMQ's: those
-- releases captured nothing else), the connection it came from (the
-- operator's name for it, never a server: dead_letters_connection_named;
-- when the capture names none, the system's default_connection, or for a
-- system whose queue names carry it, the one its queue names) and keeps
-- that system's own attributes (native). A batch holding a letter of a
-- system the archive does not know is refused whole, as the foreign key
-- would refuse it, with the systems it knows. Returns the ids stored.
CREATE OR REPLACE FUNCTION expiryctl.ingest_letters(
    actor text, queue text,
    fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[],
    expected_versions bigint[], due_ats timestamptz[], source_queues text[], origin_queues text[],
    original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[],
    last_errors text[], attempts int[], attempt_histories text[], headers text[], content_types text[],
    payloads bytea[], dead_lettered_ats timestamptz[], replay_request_ids bigint[], replay_counts int[],
    properties text[], source_systems text[], natives text[], connections text[]
) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    ids bigint[];
    trusted boolean;
    dropped integer;
    by_run boolean;
    unknown text;
BEGIN
    -- Beside the ingester, a run captures its own cohort's queues (rule
    -- role): it must see its jobs die again (replay_run_captures).
    by_run := NOT expiryctl.caller_in('expiryctl_ingester');
    IF by_run AND NOT (expiryctl.caller_in('expiryctl_operator')
                       AND expiryctl.replay_run_captures(array_append(source_queues, queue))) THEN
        PERFORM expiryctl.require_role('dlq ingest', 'expiryctl_ingester', 'expiryctl_operator');
        PERFORM expiryctl.replay_refuse('role', format(
            'dlq ingest needs membership of expiryctl_ingester, and an operator captures only the dead-letter queues of a replay whose run holds its lease, which %s is not: '
            || 'ask the schema owner to run `expiryctl access grant %s expiryctl_ingester`',
            queue, session_user));
    END IF;
    label := expiryctl.actor_label(actor);
    SELECT string_agg(DISTINCT quote_literal(x), ', ') INTO unknown FROM unnest(source_systems) AS x
     WHERE x IS NOT NULL AND NOT EXISTS (SELECT 1 FROM expiryctl.queue_systems q WHERE q.name = x);
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'letters of a queue system this archive does not know: %', unknown
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'dead_letters_source_system_fkey', SCHEMA = 'expiryctl', TABLE = 'dead_letters',
                  DETAIL = format('it knows %s', (SELECT string_agg(name, ', ' ORDER BY name) FROM expiryctl.queue_systems)),
                  HINT = 'a queue system is registered by the `expiryctl migrate` of a release that has its driver';
    END IF;
    trusted := expiryctl.caller_is_owner();
    SELECT count(*) INTO dropped FROM unnest(replay_request_ids, job_keys) AS c(request, job)
     WHERE c.request IS NOT NULL AND NOT trusted AND NOT expiryctl.replay_published_job(c.request, c.job);
    WITH stored AS (
        INSERT INTO expiryctl.dead_letters (
            fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            payload_sha256, payload_size, dead_lettered_at, replay_request_id, replay_count, previous_id, properties,
            source_system, native, connection)
        SELECT s.fingerprint, s.job_key, s.message_id, s.reservation_id, s.idempotency_key, s.expected_version, s.due_at,
            s.source_queue, s.origin_queue, s.original_exchange, s.original_routing_key, s.reason_category,
            s.error_class, s.last_error, s.attempts, s.attempt_history::jsonb, s.headers::jsonb, s.content_type, s.payload,
            sha256(s.payload), length(s.payload), s.dead_lettered_at,
            CASE WHEN s.replay_request_id IS NULL OR trusted OR expiryctl.replay_published_job(s.replay_request_id, s.job_key)
                 THEN s.replay_request_id END,
            CASE WHEN s.replay_request_id IS NULL OR trusted OR expiryctl.replay_published_job(s.replay_request_id, s.job_key)
                 THEN s.replay_count ELSE 0 END,
            CASE WHEN s.job_key IS NOT NULL THEN
                (SELECT d.id FROM expiryctl.dead_letters d WHERE d.job_key = s.job_key ORDER BY d.id DESC LIMIT 1)
            END,
            s.properties::jsonb, k.system, s.native::jsonb,
            -- A queue that does not begin as its system's do still gets a
            -- connection here, so that dead_letters_system_names_queue,
            -- not the column's NOT NULL, says what is wrong with it.
            coalesce(s.connection, q.default_connection,
                     CASE WHEN q.names_connection_in_queue
                          THEN split_part(substr(s.source_queue, length(q.queue_prefix) + 1), '/', 1) END)
        FROM unnest(fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys, expected_versions, due_ats,
            source_queues, origin_queues, original_exchanges, original_routing_keys, reason_categories, error_classes,
            last_errors, attempts, attempt_histories, headers, content_types, payloads, dead_lettered_ats,
            replay_request_ids, replay_counts, properties, source_systems, natives, connections) WITH ORDINALITY
            AS s(fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            dead_lettered_at, replay_request_id, replay_count, properties, source_system, native, connection, ordinal)
        -- A letter of a release before 00035 names no system: those
        -- captured from RabbitMQ alone.
        CROSS JOIN LATERAL (SELECT coalesce(s.source_system, 'rabbitmq') AS system) k
        LEFT JOIN expiryctl.queue_systems q ON q.name = k.system
        ORDER BY s.ordinal
        ON CONFLICT (fingerprint) DO NOTHING
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM stored;
    PERFORM expiryctl.audit_write(label, 'dlq.ingest.batch', 'queue:' || queue, jsonb_build_object(
        'letters', cardinality(fingerprints), 'stored', cardinality(ids),
        'duplicates', cardinality(fingerprints) - cardinality(ids),
        'first_id', coalesce(ids[1], 0), 'last_id', coalesce(ids[cardinality(ids)], 0))
        || CASE WHEN dropped > 0 THEN jsonb_build_object('lineage_dropped', dropped) ELSE '{}' END
        || CASE WHEN by_run THEN jsonb_build_object('by_run', true) ELSE '{}' END);
    RETURN QUERY SELECT unnest(ids);
END
$$;

REVOKE ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) TO expiryctl_ingester, expiryctl_operator;

-- The forms without connections, without systems and without properties
-- stay for a capture of a release before migration 00041, 00035 or 00010
-- that is still running when its database is migrated (`dlq ingest
-- --follow` checks the schema only when it starts). Each is the form
-- above with what it lacks left NULL: its letters are RabbitMQ's or SQS's,
-- from the system's default connection; a job store's letter of such a
-- release names a server, which dead_letters_connection_named refuses.
CREATE OR REPLACE FUNCTION expiryctl.ingest_letters(
    actor text, queue text,
    fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[],
    expected_versions bigint[], due_ats timestamptz[], source_queues text[], origin_queues text[],
    original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[],
    last_errors text[], attempts int[], attempt_histories text[], headers text[], content_types text[],
    payloads bytea[], dead_lettered_ats timestamptz[], replay_request_ids bigint[], replay_counts int[],
    properties text[] DEFAULT NULL, source_systems text[] DEFAULT NULL, natives text[] DEFAULT NULL
) RETURNS SETOF bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT expiryctl.ingest_letters(actor, queue, fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys,
        expected_versions, due_ats, source_queues, origin_queues, original_exchanges, original_routing_keys,
        reason_categories, error_classes, last_errors, attempts, attempt_histories, headers, content_types, payloads,
        dead_lettered_ats, replay_request_ids, replay_counts, properties, source_systems, natives, NULL::text[])
$$;

REVOKE ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]) TO expiryctl_ingester, expiryctl_operator;
