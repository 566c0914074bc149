-- +goose Up
-- A letter's status moves three times in a replay (into a request, out of
-- it as replayed, discarded or back to dead), and each move rewrote the
-- wide dead_letters row: status is in the predicates of the two waiting
-- indexes, so no update was HOT, and each wrote a new copy of the row, an
-- entry in each of its nine indexes and about 1.4 kB of WAL. That was half
-- of PostgreSQL's CPU in a replay (make bench, issue 17). The status now
-- lives in a narrow row of its own, with the immutable columns that the
-- waiting indexes and the tallies are keyed on: a move rewrites about a
-- hundred bytes and the one index the letter is still in.
--
-- dead_letters keeps what was captured; dead_letter_states holds what has
-- become of it. A row is made for each letter by a statement trigger on
-- dead_letters, whoever inserts it, and the tallies (00001, 00012) are now
-- kept from dead_letter_states, where the status moves. Nothing but the
-- status of a state row may change, and no state row may be deleted.
CREATE TABLE expiryctl.dead_letter_states (
    dead_letter_id bigint PRIMARY KEY,
    status text NOT NULL DEFAULT 'dead' CHECK (status IN ('dead', 'in_request', 'replayed', 'discarded')),
    reason_category text NOT NULL,
    source_queue text NOT NULL,
    error_class text,
    attempts integer NOT NULL,
    dead_lettered_at timestamptz NOT NULL,
    due_at timestamptz
);
COMMENT ON TABLE expiryctl.dead_letter_states IS 'What became of each dead letter (its status), with the captured columns its waiting indexes and tallies are keyed on; one row per dead_letters row, made by dead_letters_track_state.';

-- The letters archived before this migration, copied once. Writers wait:
-- the DROP COLUMN below holds dead_letters until this migration commits.
LOCK TABLE expiryctl.dead_letters IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO expiryctl.dead_letter_states (dead_letter_id, status, reason_category, source_queue, error_class,
    attempts, dead_lettered_at, due_at)
SELECT id, status, reason_category, source_queue, error_class, attempts, dead_lettered_at, due_at
FROM expiryctl.dead_letters ORDER BY id;

CREATE INDEX dead_letter_states_outstanding_oldest ON expiryctl.dead_letter_states (reason_category, dead_lettered_at)
    WHERE status IN ('dead', 'in_request');
CREATE INDEX dead_letter_states_waiting_due ON expiryctl.dead_letter_states (due_at)
    WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL;

-- The tallies' functions read only columns the state row has, so they
-- move with their keys unchanged.
DROP TRIGGER dead_letters_tally_insert ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_tally_update ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_tally_delete ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_signal_tally_insert ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_signal_tally_update ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_signal_tally_delete ON expiryctl.dead_letters;
CREATE TRIGGER dead_letter_states_tally_insert AFTER INSERT ON expiryctl.dead_letter_states
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letter_states_tally_update AFTER UPDATE ON expiryctl.dead_letter_states
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letter_states_signal_tally_insert AFTER INSERT ON expiryctl.dead_letter_states
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letter_states_signal_tally_update AFTER UPDATE ON expiryctl.dead_letter_states
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();

DROP INDEX expiryctl.dead_letters_outstanding_oldest;
DROP INDEX expiryctl.dead_letters_waiting_due;
ALTER TABLE expiryctl.dead_letters DROP COLUMN status;

-- +goose StatementBegin
CREATE FUNCTION expiryctl.dead_letters_track_state() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A statement trigger, not a default or the ingest function's work:
    -- every letter gets its state row, however it was inserted.
    INSERT INTO expiryctl.dead_letter_states (dead_letter_id, reason_category, source_queue, error_class, attempts,
        dead_lettered_at, due_at)
    SELECT id, reason_category, source_queue, error_class, attempts, dead_lettered_at, due_at
    FROM new_rows ORDER BY id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION expiryctl.dead_letters_track_state() FROM PUBLIC;
CREATE TRIGGER dead_letters_track_state AFTER INSERT ON expiryctl.dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.dead_letters_track_state();

-- +goose StatementBegin
CREATE FUNCTION expiryctl.dead_letter_states_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format(
            'the state of dead letter %s cannot be deleted: the archive keeps every letter and what became of it', OLD.dead_letter_id));
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: of its state, only the status moves', OLD.dead_letter_id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION expiryctl.dead_letter_states_refuse_change() FROM PUBLIC;
CREATE TRIGGER dead_letter_states_frozen BEFORE UPDATE ON expiryctl.dead_letter_states
    FOR EACH ROW
    WHEN (NEW.dead_letter_id IS DISTINCT FROM OLD.dead_letter_id OR NEW.reason_category IS DISTINCT FROM OLD.reason_category
          OR NEW.source_queue IS DISTINCT FROM OLD.source_queue OR NEW.error_class IS DISTINCT FROM OLD.error_class
          OR NEW.attempts IS DISTINCT FROM OLD.attempts OR NEW.dead_lettered_at IS DISTINCT FROM OLD.dead_lettered_at
          OR NEW.due_at IS DISTINCT FROM OLD.due_at)
    EXECUTE FUNCTION expiryctl.dead_letter_states_refuse_change();
CREATE TRIGGER dead_letter_states_no_delete BEFORE DELETE ON expiryctl.dead_letter_states
    FOR EACH ROW EXECUTE FUNCTION expiryctl.dead_letter_states_refuse_change();
CREATE TRIGGER dead_letter_states_no_truncate BEFORE TRUNCATE ON expiryctl.dead_letter_states
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

-- attempts is a key of the tallies and of the state row: it joins the
-- columns that never change, which the trigger's function already refuses
-- to see change (its redaction case keeps everything but the payload and
-- headers).
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters
    FOR EACH ROW
    WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.headers IS DISTINCT FROM OLD.headers
          OR NEW.properties IS DISTINCT FROM OLD.properties
          OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256 OR NEW.fingerprint IS DISTINCT FROM OLD.fingerprint
          OR NEW.job_key IS DISTINCT FROM OLD.job_key OR NEW.message_id IS DISTINCT FROM OLD.message_id
          OR NEW.reservation_id IS DISTINCT FROM OLD.reservation_id
          OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
          OR NEW.expected_version IS DISTINCT FROM OLD.expected_version OR NEW.due_at IS DISTINCT FROM OLD.due_at
          OR NEW.source_queue IS DISTINCT FROM OLD.source_queue OR NEW.origin_queue IS DISTINCT FROM OLD.origin_queue
          OR NEW.original_exchange IS DISTINCT FROM OLD.original_exchange
          OR NEW.original_routing_key IS DISTINCT FROM OLD.original_routing_key
          OR NEW.content_type IS DISTINCT FROM OLD.content_type OR NEW.payload_size IS DISTINCT FROM OLD.payload_size
          OR NEW.dead_lettered_at IS DISTINCT FROM OLD.dead_lettered_at OR NEW.ingested_at IS DISTINCT FROM OLD.ingested_at
          OR NEW.reason_category IS DISTINCT FROM OLD.reason_category OR NEW.error_class IS DISTINCT FROM OLD.error_class
          OR NEW.last_error IS DISTINCT FROM OLD.last_error OR NEW.attempt_history IS DISTINCT FROM OLD.attempt_history
          OR NEW.previous_id IS DISTINCT FROM OLD.previous_id OR NEW.replay_request_id IS DISTINCT FROM OLD.replay_request_id
          OR NEW.replay_count IS DISTINCT FROM OLD.replay_count
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at
          OR NEW.attempts IS DISTINCT FROM OLD.attempts)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();

-- Read as dead_letters is.
GRANT SELECT ON expiryctl.dead_letter_states TO expiryctl_operator, expiryctl_approver, expiryctl_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    -- A redaction empties the payload and the headers and changes nothing
    -- else: the columns its state row copies included, which would
    -- otherwise disagree with the letter.
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.properties IS NOT DISTINCT FROM OLD.properties
       AND NEW.dead_lettered_at = OLD.dead_lettered_at
       AND NEW.reason_category = OLD.reason_category AND NEW.source_queue = OLD.source_queue
       AND NEW.error_class IS NOT DISTINCT FROM OLD.error_class AND NEW.attempts = OLD.attempts
       AND NEW.due_at IS NOT DISTINCT FROM OLD.due_at AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload, properties and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The functions that read or move a letter's status, as before, on its state row.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.letters_matching(f jsonb) RETURNS SETOF expiryctl.dead_letters
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT d.* FROM expiryctl.dead_letters d
      JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id
     WHERE s.status = 'dead' AND d.redacted_at IS NULL
       AND (f->'reason' IS NULL OR jsonb_array_length(f->'reason') = 0
            OR d.reason_category IN (SELECT jsonb_array_elements_text(f->'reason')))
       AND (coalesce(f->>'queue', '') = '' OR d.source_queue = f->>'queue')
       AND (coalesce(f->>'status', '') = '' OR s.status = f->>'status')
       AND (f->>'since' IS NULL OR d.dead_lettered_at >= (f->>'since')::timestamptz)
       AND (f->>'until' IS NULL OR d.dead_lettered_at < (f->>'until')::timestamptz)
       AND (coalesce(f->>'search', '') = '' OR (
            SELECT d.reservation_id ILIKE p OR d.message_id ILIKE p OR d.idempotency_key ILIKE p
                OR d.error_class ILIKE p OR d.last_error ILIKE p
              FROM (SELECT '%' || replace(replace(replace(f->>'search', '\', '\\'), '%', '\%'), '_', '\_') || '%' AS p) s))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
                WHERE i.open AND d.id > after AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL
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
         WHERE id IN (SELECT d.id FROM expiryctl.dead_letters d
                        JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id
                       WHERE d.id > after AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL AND s.status <> 'in_request'
                       ORDER BY d.id LIMIT greatest(batch, 1) FOR UPDATE SKIP LOCKED)
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
CREATE OR REPLACE FUNCTION expiryctl.replay_cohort_changes(req bigint) RETURNS TABLE(dead_letter_id bigint, change text)
    LANGUAGE sql STABLE
    AS $$
    SELECT i.dead_letter_id,
           CASE
               WHEN d.id IS NULL THEN 'deleted'
               WHEN d.redacted_at IS NOT NULL THEN 'redacted'
               WHEN d.payload_sha256 <> i.payload_sha256 THEN 'payload changed'
               WHEN s.status = 'discarded' THEN 'discarded'
               WHEN EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id) THEN 're-ingested (dead-lettered again)'
           END
    FROM expiryctl.replay_items i
    LEFT JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
    LEFT JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = i.dead_letter_id
    WHERE i.request_id = req
      AND i.state NOT IN ('confirmed', 'skipped')
      AND (d.id IS NULL OR d.redacted_at IS NOT NULL OR d.payload_sha256 <> i.payload_sha256
           OR s.status = 'discarded'
           OR EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) RETURNS TABLE(status text, decided integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    k text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT r.status, r.kind INTO status, k FROM expiryctl.replay_requests r WHERE r.id = request FOR SHARE;
    decided := 0;
    IF status IS DISTINCT FROM 'running' THEN
        status := coalesce(status, 'missing');
        RETURN NEXT;
        RETURN;
    END IF;
    IF k <> 'discard' THEN
        PERFORM expiryctl.replay_refuse('kind', format('replay request %s is a replay: it publishes, it does not discard', request));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    WITH done AS (
        UPDATE expiryctl.replay_items SET state = 'confirmed', confirmed_at = now(), attempts = attempts + 1, open = false
         WHERE request_id = request AND ordinal BETWEEN lo AND hi AND state IN ('pending', 'publishing')
        RETURNING dead_letter_id)
    SELECT coalesce(array_agg(dead_letter_id), '{}') INTO ids FROM done;
    UPDATE expiryctl.dead_letter_states s SET status = 'discarded' WHERE s.dead_letter_id = ANY (ids) AND s.status = 'in_request';
    decided := cardinality(ids);
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- The request's row first, as replay_items_mark and replay_run_halt
    -- take it: a cancel locks that row, then (replay_request_ended) the
    -- letters and the items, so a recorder that took the items and then
    -- the letters could wait on a cancel that waits on it.
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(confirmed) > 0 THEN
        -- A confirmed item is done with its letter, so it no longer holds
        -- it: closing it here spares the request's end a second write.
        WITH done AS (
            UPDATE expiryctl.replay_items i SET state = 'confirmed', attempts = i.attempts + 1,
                   last_error = NULL, confirmed_at = now(), open = false
             WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (confirmed)
               AND i.state = 'publishing'
            RETURNING i.dead_letter_id),
        replayed AS (
            UPDATE expiryctl.dead_letter_states s SET status = 'replayed' FROM done
             WHERE s.dead_letter_id = done.dead_letter_id AND s.status = 'in_request')
        SELECT count(*) INTO moved FROM done;
        IF moved <> cardinality(confirmed) THEN
            RAISE EXCEPTION 'recorded % of % confirms for replay request %: the items changed under the runner', moved, cardinality(confirmed), request;
        END IF;
    END IF;
    IF cardinality(failed) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', attempts = i.attempts + 1, last_error = nullif(u.why, '')
          FROM unnest(failed, failed_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (failed)
           AND i.dead_letter_id = u.id AND i.state = 'publishing';
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(failed) THEN
            RAISE EXCEPTION 'recorded % of % failed publishes for replay request %: the items changed under the runner', moved, cardinality(failed), request;
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean DEFAULT false, same_handler_why text DEFAULT NULL::text, include_permanent boolean DEFAULT false) RETURNS TABLE(request_id bigint, matched integer)
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
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE s.status = 'in_request'),
           string_agg(d.id || ' (' || s.status || ')', ', ' ORDER BY d.id) FILTER (WHERE s.status <> 'dead'),
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.payload_sha256 <> c.h),
           string_agg(d.id::text, ', ' ORDER BY d.id) FILTER (WHERE d.original_exchange IS NULL
               AND d.original_routing_key IS NULL AND d.origin_queue IS NULL),
           count(*) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())),
           array_to_string((array_agg(d.id ORDER BY d.id) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())))[1:10], ', ')
      INTO bad_redacted, bad_taken, bad_decided, bad_changed, bad_target, perm_n, perm_ids
      FROM unnest(c_ids, c_hashes) AS c(id, h) JOIN expiryctl.dead_letters d ON d.id = c.id
      JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = c.id;
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
    UPDATE expiryctl.dead_letter_states SET status = 'in_request' WHERE dead_letter_id = ANY (c_ids);
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letter_states s SET status = 'dead'
         WHERE s.dead_letter_id = ANY (ARRAY(SELECT i.dead_letter_id FROM expiryctl.replay_items i
                                  WHERE i.request_id = NEW.id AND i.open))
           AND s.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    PERFORM expiryctl.replay_run_lease(request);
    SELECT coalesce(array_agg(i.dead_letter_id ORDER BY i.dead_letter_id), '{}') INTO ids
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
     WHERE i.request_id = request AND i.dead_letter_id = ANY (acked) AND i.state = 'publishing'
       AND r.status = 'cancelled';
    UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE dead_letter_id = ANY (ids) AND status = 'dead';
    PERFORM expiryctl.audit_write(label, 'replay.run.cancelled', 'replay_request:' || request, jsonb_build_object(
        'published_before_cancel_seen', to_jsonb(ids),
        'note', 'published and acked while the cancel committed; their letters are marked replayed'));
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE expiryctl.dead_letters ADD COLUMN status text DEFAULT 'dead'::text NOT NULL
    CONSTRAINT dead_letters_status_check CHECK ((status = ANY (ARRAY['dead'::text, 'in_request'::text, 'replayed'::text, 'discarded'::text])));
UPDATE expiryctl.dead_letters d SET status = s.status FROM expiryctl.dead_letter_states s
 WHERE s.dead_letter_id = d.id AND s.status <> 'dead';
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters FOR EACH ROW WHEN (((new.payload IS DISTINCT FROM old.payload) OR (new.headers IS DISTINCT FROM old.headers) OR (new.properties IS DISTINCT FROM old.properties) OR (new.payload_sha256 IS DISTINCT FROM old.payload_sha256) OR (new.fingerprint IS DISTINCT FROM old.fingerprint) OR (new.job_key IS DISTINCT FROM old.job_key) OR (new.message_id IS DISTINCT FROM old.message_id) OR (new.reservation_id IS DISTINCT FROM old.reservation_id) OR (new.idempotency_key IS DISTINCT FROM old.idempotency_key) OR (new.expected_version IS DISTINCT FROM old.expected_version) OR (new.due_at IS DISTINCT FROM old.due_at) OR (new.source_queue IS DISTINCT FROM old.source_queue) OR (new.origin_queue IS DISTINCT FROM old.origin_queue) OR (new.original_exchange IS DISTINCT FROM old.original_exchange) OR (new.original_routing_key IS DISTINCT FROM old.original_routing_key) OR (new.content_type IS DISTINCT FROM old.content_type) OR (new.payload_size IS DISTINCT FROM old.payload_size) OR (new.dead_lettered_at IS DISTINCT FROM old.dead_lettered_at) OR (new.ingested_at IS DISTINCT FROM old.ingested_at) OR (new.reason_category IS DISTINCT FROM old.reason_category) OR (new.error_class IS DISTINCT FROM old.error_class) OR (new.last_error IS DISTINCT FROM old.last_error) OR (new.attempt_history IS DISTINCT FROM old.attempt_history) OR (new.previous_id IS DISTINCT FROM old.previous_id) OR (new.replay_request_id IS DISTINCT FROM old.replay_request_id) OR (new.replay_count IS DISTINCT FROM old.replay_count) OR (new.id IS DISTINCT FROM old.id) OR (new.redacted_at IS DISTINCT FROM old.redacted_at))) EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.properties IS NOT DISTINCT FROM OLD.properties
       AND NEW.dead_lettered_at = OLD.dead_lettered_at THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload, properties and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER dead_letters_track_state ON expiryctl.dead_letters;
DROP FUNCTION expiryctl.dead_letters_track_state();
CREATE INDEX dead_letters_outstanding_oldest ON expiryctl.dead_letters USING btree (reason_category, dead_lettered_at) WHERE (status = ANY (ARRAY['dead'::text, 'in_request'::text]));
CREATE INDEX dead_letters_waiting_due ON expiryctl.dead_letters USING btree (due_at) WHERE ((status = ANY (ARRAY['dead'::text, 'in_request'::text])) AND (due_at IS NOT NULL));
CREATE TRIGGER dead_letters_signal_tally_delete AFTER DELETE ON expiryctl.dead_letters REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letters_signal_tally_insert AFTER INSERT ON expiryctl.dead_letters REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letters_signal_tally_update AFTER UPDATE ON expiryctl.dead_letters REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letters_tally_delete AFTER DELETE ON expiryctl.dead_letters REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letters_tally_insert AFTER INSERT ON expiryctl.dead_letters REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letters_tally_update AFTER UPDATE ON expiryctl.dead_letters REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
DROP TABLE expiryctl.dead_letter_states;
DROP FUNCTION expiryctl.dead_letter_states_refuse_change();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.letters_matching(f jsonb) RETURNS SETOF expiryctl.dead_letters
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT d.* FROM expiryctl.dead_letters d
     WHERE d.status = 'dead' AND d.redacted_at IS NULL
       AND (f->'reason' IS NULL OR jsonb_array_length(f->'reason') = 0
            OR d.reason_category IN (SELECT jsonb_array_elements_text(f->'reason')))
       AND (coalesce(f->>'queue', '') = '' OR d.source_queue = f->>'queue')
       AND (coalesce(f->>'status', '') = '' OR d.status = f->>'status')
       AND (f->>'since' IS NULL OR d.dead_lettered_at >= (f->>'since')::timestamptz)
       AND (f->>'until' IS NULL OR d.dead_lettered_at < (f->>'until')::timestamptz)
       AND (coalesce(f->>'search', '') = '' OR (
            SELECT d.reservation_id ILIKE p OR d.message_id ILIKE p OR d.idempotency_key ILIKE p
                OR d.error_class ILIKE p OR d.last_error ILIKE p
              FROM (SELECT '%' || replace(replace(replace(f->>'search', '\', '\\'), '%', '\%'), '_', '\_') || '%' AS p) s))
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
                WHERE i.open AND d.id > after AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL
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
                       WHERE id > after AND dead_lettered_at < cutoff AND redacted_at IS NULL AND status <> 'in_request'
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
CREATE OR REPLACE FUNCTION expiryctl.replay_cohort_changes(req bigint) RETURNS TABLE(dead_letter_id bigint, change text)
    LANGUAGE sql STABLE
    AS $$
    SELECT i.dead_letter_id,
           CASE
               WHEN d.id IS NULL THEN 'deleted'
               WHEN d.redacted_at IS NOT NULL THEN 'redacted'
               WHEN d.payload_sha256 <> i.payload_sha256 THEN 'payload changed'
               WHEN d.status = 'discarded' THEN 'discarded'
               WHEN EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id) THEN 're-ingested (dead-lettered again)'
           END
    FROM expiryctl.replay_items i
    LEFT JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
    WHERE i.request_id = req
      AND i.state NOT IN ('confirmed', 'skipped')
      AND (d.id IS NULL OR d.redacted_at IS NOT NULL OR d.payload_sha256 <> i.payload_sha256
           OR d.status = 'discarded'
           OR EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id))
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) RETURNS TABLE(status text, decided integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    k text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT r.status, r.kind INTO status, k FROM expiryctl.replay_requests r WHERE r.id = request FOR SHARE;
    decided := 0;
    IF status IS DISTINCT FROM 'running' THEN
        status := coalesce(status, 'missing');
        RETURN NEXT;
        RETURN;
    END IF;
    IF k <> 'discard' THEN
        PERFORM expiryctl.replay_refuse('kind', format('replay request %s is a replay: it publishes, it does not discard', request));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    WITH done AS (
        UPDATE expiryctl.replay_items SET state = 'confirmed', confirmed_at = now(), attempts = attempts + 1, open = false
         WHERE request_id = request AND ordinal BETWEEN lo AND hi AND state IN ('pending', 'publishing')
        RETURNING dead_letter_id)
    SELECT coalesce(array_agg(dead_letter_id), '{}') INTO ids FROM done;
    UPDATE expiryctl.dead_letters d SET status = 'discarded' WHERE d.id = ANY (ids) AND d.status = 'in_request';
    decided := cardinality(ids);
    RETURN NEXT;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- The request's row first, as replay_items_mark and replay_run_halt
    -- take it: a cancel locks that row, then (replay_request_ended) the
    -- letters and the items, so a recorder that took the items and then
    -- the letters could wait on a cancel that waits on it.
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(confirmed) > 0 THEN
        -- A confirmed item is done with its letter, so it no longer holds
        -- it: closing it here spares the request's end a second write.
        WITH done AS (
            UPDATE expiryctl.replay_items i SET state = 'confirmed', attempts = i.attempts + 1,
                   last_error = NULL, confirmed_at = now(), open = false
             WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (confirmed)
               AND i.state = 'publishing'
            RETURNING i.dead_letter_id),
        replayed AS (
            UPDATE expiryctl.dead_letters d SET status = 'replayed' FROM done
             WHERE d.id = done.dead_letter_id AND d.status = 'in_request')
        SELECT count(*) INTO moved FROM done;
        IF moved <> cardinality(confirmed) THEN
            RAISE EXCEPTION 'recorded % of % confirms for replay request %: the items changed under the runner', moved, cardinality(confirmed), request;
        END IF;
    END IF;
    IF cardinality(failed) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', attempts = i.attempts + 1, last_error = nullif(u.why, '')
          FROM unnest(failed, failed_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (failed)
           AND i.dead_letter_id = u.id AND i.state = 'publishing';
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(failed) THEN
            RAISE EXCEPTION 'recorded % of % failed publishes for replay request %: the items changed under the runner', moved, cardinality(failed), request;
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean DEFAULT false, same_handler_why text DEFAULT NULL::text, include_permanent boolean DEFAULT false) RETURNS TABLE(request_id bigint, matched integer)
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letters d SET status = 'dead'
         WHERE d.id = ANY (ARRAY(SELECT i.dead_letter_id FROM expiryctl.replay_items i
                                  WHERE i.request_id = NEW.id AND i.open))
           AND d.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    PERFORM expiryctl.replay_run_lease(request);
    SELECT coalesce(array_agg(i.dead_letter_id ORDER BY i.dead_letter_id), '{}') INTO ids
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
     WHERE i.request_id = request AND i.dead_letter_id = ANY (acked) AND i.state = 'publishing'
       AND r.status = 'cancelled';
    UPDATE expiryctl.dead_letters SET status = 'replayed' WHERE id = ANY (ids) AND status = 'dead';
    PERFORM expiryctl.audit_write(label, 'replay.run.cancelled', 'replay_request:' || request, jsonb_build_object(
        'published_before_cancel_seen', to_jsonb(ids),
        'note', 'published and acked while the cancel committed; their letters are marked replayed'));
END
$$;
-- +goose StatementEnd
