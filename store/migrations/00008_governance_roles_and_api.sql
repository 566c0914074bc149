-- Governance that holds against a second client. Until now the rules lived
-- in triggers while every role that could reach the schema could write its
-- tables: a requester with psql could loosen the policy, grow a frozen
-- cohort or edit a payload after approval. From here on:
--
--   * five NOLOGIN groups (ingester, operator, approver, auditor, admin) hold
--     no INSERT, UPDATE, DELETE or TRUNCATE on any table of the schema;
--   * every write is a function of the schema, SECURITY DEFINER (it runs as
--     the schema's owner) with search_path pinned, EXECUTE granted only to the
--     groups that need it; each takes identity from session_user, checks the
--     caller's membership and its rule, and writes its audit row in the same
--     transaction;
--   * four-eyes compares logins (session_user), whatever label a client
--     declares;
--   * a letter's identity, payload and headers never change after capture
--     (retention redaction only), and a replay item's state moves only along
--     pending -> publishing -> confirmed | failed | skipped.
--
-- The owner (and a superuser) can still do anything: for them governance is
-- advisory, and expiryctl says so on every command.

-- +goose Up

-- The groups are cluster-wide; another database may have created them
-- already, possibly at this very moment.
-- +goose StatementBegin
DO $$
DECLARE
    g text;
    r record;
BEGIN
    FOREACH g IN ARRAY ARRAY['expiryctl_ingester', 'expiryctl_operator', 'expiryctl_approver',
                             'expiryctl_auditor', 'expiryctl_admin'] LOOP
        SELECT rolcanlogin, rolsuper INTO r FROM pg_catalog.pg_roles WHERE rolname = g;
        IF NOT FOUND THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT', g);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        ELSIF r.rolcanlogin OR r.rolsuper THEN
            RAISE EXCEPTION 'role % exists and is a login or superuser role: expiryctl''s groups must be NOLOGIN', g
                USING HINT = 'rename or drop that role, then run expiryctl migrate again';
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Who may do what is membership of these groups; the functions check it.
-- The owner (or a superuser) passes every check: governance is advisory for
-- them, and the audit trail records their login.
-- +goose StatementBegin
CREATE FUNCTION expiryctl.caller_is_owner() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_has_role(session_user, n.nspowner, 'MEMBER')
      FROM pg_namespace n WHERE n.nspname = 'expiryctl'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION expiryctl.caller_in(variadic groups text[]) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT expiryctl.caller_is_owner()
        OR EXISTS (SELECT 1 FROM unnest(groups) g
                   WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g)
                     AND pg_has_role(session_user, g, 'MEMBER'))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- require_role refuses (rule "role") a caller who is in none of groups.
CREATE FUNCTION expiryctl.require_role(action text, variadic groups text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT expiryctl.caller_in(VARIADIC groups) THEN
        PERFORM expiryctl.replay_refuse('role', format(
            '%s needs membership of %s, and the login %s has none: ask the schema owner to run `expiryctl access grant %s %s`',
            action, array_to_string(groups, ' or '), session_user, session_user, groups[1]));
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- refuse_text raises like replay_refuse; it returns text so that a plain
-- SQL function can call it in a CASE branch (PL/pgSQL then loads only when
-- something is refused).
CREATE FUNCTION expiryctl.refuse_text(rule text, message text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- actor_label is the label an audit row and a request record beside the
-- login: the one the client declared, else the login itself. Under
-- identity_mode db-role a declared label must be the login.
CREATE FUNCTION expiryctl.actor_label(declared text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN coalesce(btrim(declared), '') = '' THEN session_user::text
        WHEN declared = session_user THEN declared
        WHEN (SELECT identity_mode FROM expiryctl.policy WHERE singleton) = 'declared' THEN declared
        ELSE expiryctl.refuse_text('identity-db-role', format(
            'policy identity_mode is db-role: you act as the database role %s, and the label %s differs; drop --actor/EXPIRYCTL_ACTOR (or set it to %s)',
            session_user, declared, session_user))
    END
$$;
-- +goose StatementEnd

-- The actions whose "ok" rows only the functions below write: each records a
-- state change together with the change. A client may still record that
-- such an action was refused or failed (the refused transaction rolled back,
-- taking nothing with it).
-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_reserved(action text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT action IN ('replay.request', 'replay.approve', 'replay.reject', 'replay.cancel', 'replay.expire',
                      'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled', 'replay.halt',
                      'replay.complete', 'policy.set', 'policy.propose', 'policy.approve', 'policy.reject',
                      'access.grant', 'access.revoke', 'dlq.ingest.batch', 'dlq.purge.batch', 'migrate.governance')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- audit_append is how a command records what it did: reads, and the
-- refusals and failures of anything. One plain-SQL statement, so that the
-- audit row of a read command costs no PL/pgSQL load.
CREATE FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text)
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
-- audit_write is the functions' own: the row of a state change, written in
-- the change's transaction.
CREATE FUNCTION expiryctl.audit_write(actor text, action text, target text, details jsonb, outcome text DEFAULT 'ok')
RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    VALUES (actor, action, coalesce(target, ''), coalesce(details, '{}'), outcome)
$$;
-- +goose StatementEnd

-- ---------------------------------------------------------------------------
-- The archive: a letter's identity, payload and headers never change after
-- capture. Retention may redact payload and headers (and nothing else).

-- +goose StatementBegin
CREATE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
       AND NEW.dead_lettered_at = OLD.dead_lettered_at THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters
    FOR EACH ROW
    WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.headers IS DISTINCT FROM OLD.headers
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
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
CREATE TRIGGER dead_letters_no_delete BEFORE DELETE ON expiryctl.dead_letters
    FOR EACH ROW EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
CREATE TRIGGER dead_letters_no_truncate BEFORE TRUNCATE ON expiryctl.dead_letters
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

-- +goose StatementBegin
-- ingest_letters stores one batch of captured letters and its audit row.
-- The payload's hash is the database's own; a copy whose fingerprint is
-- already archived is skipped; a letter of a job already archived links to
-- that job's latest row. Returns the ids stored.
CREATE FUNCTION expiryctl.ingest_letters(
    actor text, queue text,
    fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[],
    expected_versions bigint[], due_ats timestamptz[], source_queues text[], origin_queues text[],
    original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[],
    last_errors text[], attempts int[], attempt_histories text[], headers text[], content_types text[],
    payloads bytea[], dead_lettered_ats timestamptz[], replay_request_ids bigint[], replay_counts int[]
) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('dlq ingest', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    WITH stored AS (
        INSERT INTO expiryctl.dead_letters (
            fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            payload_sha256, payload_size, dead_lettered_at, replay_request_id, replay_count, previous_id)
        SELECT s.fingerprint, s.job_key, s.message_id, s.reservation_id, s.idempotency_key, s.expected_version, s.due_at,
            s.source_queue, s.origin_queue, s.original_exchange, s.original_routing_key, s.reason_category,
            s.error_class, s.last_error, s.attempts, s.attempt_history::jsonb, s.headers::jsonb, s.content_type, s.payload,
            sha256(s.payload), length(s.payload), s.dead_lettered_at, s.replay_request_id, s.replay_count,
            CASE WHEN s.job_key IS NOT NULL THEN
                (SELECT d.id FROM expiryctl.dead_letters d WHERE d.job_key = s.job_key ORDER BY d.id DESC LIMIT 1)
            END
        FROM unnest(fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys, expected_versions, due_ats,
            source_queues, origin_queues, original_exchanges, original_routing_keys, reason_categories, error_classes,
            last_errors, attempts, attempt_histories, headers, content_types, payloads, dead_lettered_ats,
            replay_request_ids, replay_counts) WITH ORDINALITY
            AS s(fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            dead_lettered_at, replay_request_id, replay_count, ordinal)
        ORDER BY s.ordinal
        ON CONFLICT (fingerprint) DO NOTHING
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM stored;
    PERFORM expiryctl.audit_write(label, 'dlq.ingest.batch', 'queue:' || queue, jsonb_build_object(
        'letters', cardinality(fingerprints), 'stored', cardinality(ids),
        'duplicates', cardinality(fingerprints) - cardinality(ids),
        'first_id', coalesce(ids[1], 0), 'last_id', coalesce(ids[cardinality(ids)], 0)));
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- purge_letters redacts the payload and headers of up to batch letters
-- dead-lettered before cutoff, which must lie outside the policy's
-- retention window. Letters an open request holds are left alone: their
-- cohort is frozen. Returns the ids redacted.
CREATE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamptz, batch integer)
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

-- ---------------------------------------------------------------------------
-- Requests.

-- An open request approved by its own requester's login (possible before
-- this migration, when four-eyes compared labels) is void: it cannot run.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT id, status FROM expiryctl.replay_requests
              WHERE status IN ('approved', 'running', 'halted') AND reviewed_db_role = requested_db_role
              ORDER BY id FOR UPDATE LOOP
        -- The guard trigger does not let a request be cancelled with its
        -- halt reason from outside a run; cancelling is allowed.
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided by migration 00008: approved by the requester''s own login'
         WHERE id = r.id;
        INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
        VALUES ('migration', 'replay.cancel', 'replay_request:' || r.id,
                jsonb_build_object('why', 'four-eyes now compares logins: this request was approved by its requester''s own login',
                                   'status_before', r.status), 'ok');
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Four-eyes by login, for every row written from now on.
ALTER TABLE expiryctl.replay_requests
    ADD COLUMN started_db_role text,
    ADD CONSTRAINT four_eyes_login CHECK (reviewed_db_role IS NULL OR reviewed_db_role <> requested_db_role) NOT VALID;

-- +goose StatementBegin
-- The request guard as 00003 wrote it, but: the approvers under policy are
-- logins (an empty list means every member of expiryctl_approver), the
-- reviewer's login must differ from the requester's in every identity mode,
-- and the transaction id that lets items be inserted is frozen too.
CREATE OR REPLACE FUNCTION expiryctl.replay_request_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    pol expiryctl.policy%ROWTYPE;
    changed record;
BEGIN
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton;

    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.reviewed_by IS NOT NULL OR NEW.approval_spent THEN
            PERFORM expiryctl.replay_refuse('new-requests-pending', 'a replay request starts pending and unreviewed');
        END IF;
        IF NEW.item_count > pol.max_cohort THEN
            PERFORM expiryctl.replay_refuse('max-cohort', format(
                'the cohort has %s letters and policy allows at most %s per request: narrow the filter or lower --max',
                NEW.item_count, pol.max_cohort));
        END IF;
        IF NEW.rate > pol.max_rate THEN
            PERFORM expiryctl.replay_refuse('max-rate', format(
                'rate %s/s is above the policy maximum of %s/s: lower --rate', NEW.rate, pol.max_rate));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.requested_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the requester must be the database role %s, not %s',
                session_user, NEW.requested_by));
        END IF;
        NEW.requested_db_role := session_user;
        NEW.created_xid := pg_current_xact_id();
        RETURN NEW;
    END IF;

    IF NEW.kind IS DISTINCT FROM OLD.kind OR NEW.filter IS DISTINCT FROM OLD.filter
       OR NEW.item_count IS DISTINCT FROM OLD.item_count OR NEW.cohort_hash IS DISTINCT FROM OLD.cohort_hash
       OR NEW.rate IS DISTINCT FROM OLD.rate OR NEW.canary IS DISTINCT FROM OLD.canary
       OR NEW.fresh_key IS DISTINCT FROM OLD.fresh_key OR NEW.to_exchange IS DISTINCT FROM OLD.to_exchange
       OR NEW.to_routing_key IS DISTINCT FROM OLD.to_routing_key OR NEW.requested_by IS DISTINCT FROM OLD.requested_by
       OR NEW.requested_db_role IS DISTINCT FROM OLD.requested_db_role OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.created_xid IS DISTINCT FROM OLD.created_xid
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.why IS DISTINCT FROM OLD.why
       OR NEW.stop_failure_ratio IS DISTINCT FROM OLD.stop_failure_ratio
       OR NEW.stop_queue_depth IS DISTINCT FROM OLD.stop_queue_depth
       OR NEW.stop_redead_ratio IS DISTINCT FROM OLD.stop_redead_ratio
       OR NEW.canary_window IS DISTINCT FROM OLD.canary_window
       OR NEW.eligibility_confirmed IS DISTINCT FROM OLD.eligibility_confirmed THEN
        PERFORM expiryctl.replay_refuse('frozen-request', format('replay request %s is frozen: its cohort and limits cannot be changed', OLD.id));
    END IF;

    IF NEW.status = OLD.status THEN
        IF NEW.reviewed_by IS DISTINCT FROM OLD.reviewed_by OR NEW.reviewed_db_role IS DISTINCT FROM OLD.reviewed_db_role
           OR NEW.reviewed_at IS DISTINCT FROM OLD.reviewed_at THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s: it was already reviewed by %s', OLD.id, OLD.status, coalesce(OLD.reviewed_by, 'nobody')));
        END IF;
        IF NEW.approval_spent IS DISTINCT FROM OLD.approval_spent OR NEW.approvals IS DISTINCT FROM OLD.approvals
           OR NEW.approval_expires_at IS DISTINCT FROM OLD.approval_expires_at
           OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.finished_at IS DISTINCT FROM OLD.finished_at THEN
            PERFORM expiryctl.replay_refuse('single-use-approval', format(
                'the approval of replay request %s changes only through a review or the start of a run', OLD.id));
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.status IN ('approved', 'rejected') THEN
        IF OLD.status NOT IN ('pending', 'halted') THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s, not pending: it was already reviewed', OLD.id, OLD.status));
        END IF;
        IF now() >= OLD.expires_at AND OLD.status = 'pending' THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'replay request %s expired at %s: ask the requester to make a new one', OLD.id, OLD.expires_at));
        END IF;
        IF session_user = OLD.requested_db_role THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                'the login %s requested replay request %s and cannot review it, whatever --actor says: another approver must',
                session_user, OLD.id));
        END IF;
        IF NEW.reviewed_by IS NULL OR NEW.reviewed_by = OLD.requested_by THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                '%s requested replay request %s and cannot review it: another approver must', OLD.requested_by, OLD.id));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.reviewed_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the reviewer must be the database role %s, not %s',
                session_user, NEW.reviewed_by));
        END IF;
        IF cardinality(pol.approvers) > 0 AND NOT (session_user = ANY (pol.approvers)) THEN
            PERFORM expiryctl.replay_refuse('approvers', format(
                'the login %s is not an approver under the policy (approvers: %s)', session_user,
                array_to_string(pol.approvers, ', ')));
        END IF;
        IF NEW.status = 'approved' THEN
            SELECT * INTO changed FROM expiryctl.replay_cohort_changes(OLD.id) LIMIT 1;
            IF FOUND THEN
                PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                    'the cohort of replay request %s changed since it was frozen (dead letter %s: %s): make a new request',
                    OLD.id, changed.dead_letter_id, changed.change));
            END IF;
            NEW.approval_spent := false;
            NEW.approvals := OLD.approvals + 1;
            NEW.approval_expires_at := now() + pol.approval_ttl;
            NEW.halt_reason := NULL;
        END IF;
        NEW.reviewed_db_role := session_user;
        NEW.reviewed_at := now();
        RETURN NEW;
    END IF;

    IF NEW.status = 'running' THEN
        IF OLD.status <> 'approved' OR OLD.approval_spent THEN
            PERFORM expiryctl.replay_refuse('approved-to-run', format(
                'replay request %s is %s: only an approved request runs', OLD.id, OLD.status));
        END IF;
        IF OLD.approval_expires_at < now() THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'the approval of replay request %s expired: it must be approved again', OLD.id));
        END IF;
        NEW.approval_spent := true;
        NEW.started_at := coalesce(OLD.started_at, now());
        RETURN NEW;
    END IF;

    IF NEW.status IN ('halted', 'completed') AND OLD.status <> 'running' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: only a running request halts or completes', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'pending' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: no request goes back to pending', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'cancelled' AND OLD.status NOT IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('cancel', format('replay request %s is %s and cannot be cancelled', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'expired' AND NOT (
        (OLD.status = 'pending' AND OLD.expires_at <= now()) OR
        (OLD.status = 'approved' AND OLD.approval_expires_at <= now())) THEN
        PERFORM expiryctl.replay_refuse('expire', format('replay request %s is %s and cannot expire', OLD.id, OLD.status));
    END IF;
    IF OLD.status IN ('rejected', 'expired', 'completed', 'cancelled') THEN
        PERFORM expiryctl.replay_refuse('terminal', format('replay request %s is %s: it is over', OLD.id, OLD.status));
    END IF;
    IF NEW.status IN ('completed', 'cancelled', 'rejected', 'expired') THEN
        NEW.finished_at := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- An item's state moves pending -> publishing -> confirmed | failed |
-- skipped, pending -> skipped | failed (decided before publishing), and,
-- for a discard, pending -> confirmed. publishing -> pending returns an
-- item that was marked but not published (a run stopping, or a resume).
-- A decided item never moves again. The WHEN clause below lets every
-- allowed move through without calling this.
CREATE FUNCTION expiryctl.replay_items_refuse_move() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.state = 'pending' AND NEW.state = 'confirmed'
       AND (SELECT kind FROM expiryctl.replay_requests WHERE id = NEW.request_id) = 'discard' THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s is %s and cannot become %s: items move pending -> publishing -> confirmed, failed or skipped, and a decided item never moves again',
        OLD.dead_letter_id, OLD.request_id, OLD.state, NEW.state));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replay_items_moves BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN (NEW.state IS DISTINCT FROM OLD.state AND NOT (
              (OLD.state = 'pending' AND NEW.state IN ('publishing', 'skipped', 'failed'))
           OR (OLD.state = 'publishing' AND NEW.state IN ('confirmed', 'failed', 'skipped', 'pending'))))
    EXECUTE FUNCTION expiryctl.replay_items_refuse_move();

-- +goose StatementBegin
-- A confirmed item keeps what confirmed it; an item closed stays closed.
CREATE FUNCTION expiryctl.replay_items_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s: a closed item is not reopened, and attempts and confirm times are not rewritten',
        OLD.dead_letter_id, OLD.request_id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replay_items_no_rewrite BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN ((NEW.open AND NOT OLD.open) OR NEW.attempts < OLD.attempts
          OR (OLD.confirmed_at IS NOT NULL AND NEW.confirmed_at IS DISTINCT FROM OLD.confirmed_at))
    EXECUTE FUNCTION expiryctl.replay_items_refuse_rewrite();

-- +goose StatementBegin
-- An item is closed (its letter free for another request) when it is
-- confirmed or its request ends, never while its request is open.
CREATE FUNCTION expiryctl.replay_items_refuse_early_close() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (SELECT status FROM expiryctl.replay_requests WHERE id = NEW.request_id) IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('item-states', format(
            'item %s of replay request %s is %s and its request is open: it keeps its letter until it is confirmed or the request ends',
            OLD.dead_letter_id, OLD.request_id, NEW.state));
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replay_items_no_early_close BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN (OLD.open AND NOT NEW.open AND NEW.state <> 'confirmed')
    EXECUTE FUNCTION expiryctl.replay_items_refuse_early_close();

-- +goose StatementBegin
-- replay_expire_stale marks requests whose review or approval window has
-- passed expired, each with its audit row. Anyone in a group may call it:
-- what is stale is the database's clock's decision.
CREATE FUNCTION expiryctl.replay_expire_stale(actor text) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('expiring stale requests', 'expiryctl_operator', 'expiryctl_approver',
                                   'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    FOR rid IN UPDATE expiryctl.replay_requests SET status = 'expired'
                WHERE (status = 'pending' AND expires_at <= now()) OR (status = 'approved' AND approval_expires_at <= now())
                RETURNING id LOOP
        PERFORM expiryctl.audit_write(label, 'replay.expire', 'replay_request:' || rid,
                                      '{"reason": "review or approval window passed"}');
        RETURN NEXT rid;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- letters_matching resolves a request's selection, as the requester wrote
-- it ({"ids": [...]} or {"filter": {...}, "max": N}), to the letters of the
-- archive it names: by id, or the oldest waiting letters the filter
-- matches. The same filter keys as `dlq list`.
CREATE FUNCTION expiryctl.letters_matching(f jsonb)
RETURNS SETOF expiryctl.dead_letters
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
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
CREATE FUNCTION expiryctl.replay_review(
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
CREATE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
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

-- ---------------------------------------------------------------------------
-- Runs. A runner holds the request's advisory lock (namespace "RPLY", the
-- request id) on a session of its own; every write of a run checks that a
-- session of the caller's login holds it, so no second client can move a
-- running request's items while its runner works.

-- +goose StatementBegin
CREATE FUNCTION expiryctl.replay_run_lease(request bigint) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.classid::int8 = 1380994137 AND l.objid::int8 = request & 4294967295
                      AND a.usename = session_user) THEN
        PERFORM expiryctl.replay_refuse('single-runner', format(
            'no session of the login %s holds the runner lock of replay request %s: only its runner moves its items (`expiryctl replay run %s`)',
            session_user, request, request));
    END IF;
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
-- replay_items_mark commits the runner's decision for a window of items
-- (ordinals lo..hi): skipped, failed, or publishing (about to be
-- published). Returns the request's status; when it is not running,
-- nothing moved.
CREATE FUNCTION expiryctl.replay_items_mark(
    request bigint, lo integer, hi integer, publish bigint[],
    skip bigint[], skip_why text[], fail bigint[], fail_why text[])
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    st text;
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- FOR SHARE: a cancel waits for this window's commit, and the runner
    -- sees the cancel at its next check.
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(skip) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'skipped', last_error = u.why
          FROM unnest(skip, skip_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(skip) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to skipped: the items changed under the runner', moved, cardinality(skip), request;
        END IF;
    END IF;
    IF cardinality(fail) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', last_error = u.why, attempts = i.attempts + 1
          FROM unnest(fail, fail_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(fail) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to failed: the items changed under the runner', moved, cardinality(fail), request;
        END IF;
    END IF;
    IF cardinality(publish) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'publishing'
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (publish)
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(publish) THEN
            RAISE EXCEPTION 'marked % of % items of replay request % publishing: the items changed under the runner', moved, cardinality(publish), request;
        END IF;
    END IF;
    RETURN st;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_items_record writes the broker's answers for items being
-- published: confirmed (and the letter replayed) only from publishing, or
-- failed.
CREATE FUNCTION expiryctl.replay_items_record(
    request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
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
-- replay_run_interrupted records a run that stops without a status change
-- (the next run resumes it). Items it marked publishing but never
-- published go back to pending.
CREATE FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    IF cardinality(unsent) > 0 THEN
        PERFORM expiryctl.replay_run_lease(request);
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.run.interrupted', 'replay_request:' || request, details, 'error');
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_run_halt halts a running request on a stop condition. Returns the
-- status the request had when it was not running (then nothing changed),
-- else 'halted'.
CREATE FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(unsent) > 0 THEN
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'halted', halt_reason = reason WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.halt', 'replay_request:' || request, details);
    RETURN 'halted';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_run_complete completes a running request once none of its items
-- is left to publish, recording every item's outcome. Returns the status
-- the request had when it was not running, else 'completed'.
CREATE FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    st text;
    open_n integer;
    outcome jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    SELECT count(*) FILTER (WHERE state IN ('pending', 'publishing')),
           jsonb_build_object(
               'confirmed', coalesce(jsonb_agg(dead_letter_id ORDER BY ordinal) FILTER (WHERE state = 'confirmed'), '[]'),
               'skipped', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'skipped'), '[]'),
               'failed', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'failed'), '[]'))
      INTO open_n, outcome
      FROM expiryctl.replay_items WHERE request_id = request;
    IF open_n > 0 THEN
        RAISE EXCEPTION 'replay request % still has % items not yet published: not completing it', request, open_n;
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'completed' WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.complete', 'replay_request:' || request, coalesce(details, '{}') || outcome);
    RETURN 'completed';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_discard_window marks the open items of a running discard whose
-- ordinals lie in lo..hi confirmed and their letters discarded. Returns the
-- request's status and how many items it decided.
CREATE FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer)
RETURNS TABLE (status text, decided integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
-- replay_run_acked_after_cancel records items the broker acked after the
-- request was cancelled under its runner: they were published, so their
-- letters are marked replayed. Only items of the request that were being
-- published qualify.
CREATE FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- ---------------------------------------------------------------------------
-- Policy under four-eyes: an admin proposes, a different admin approves.
-- The owner sets policy directly (the first policy, and whenever it acts:
-- governance is advisory for the owner), audited as such.

CREATE TABLE expiryctl.policy_changes (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    changes          jsonb       NOT NULL,
    why              text        NOT NULL DEFAULT '',
    proposed_by      text        NOT NULL,
    proposed_db_role text        NOT NULL DEFAULT session_user,
    proposed_at      timestamptz NOT NULL DEFAULT now(),
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'rejected')),
    reviewed_by      text,
    reviewed_db_role text,
    reviewed_at      timestamptz,
    CONSTRAINT policy_four_eyes CHECK (reviewed_db_role IS NULL OR reviewed_db_role <> proposed_db_role)
);
CREATE INDEX policy_changes_pending ON expiryctl.policy_changes (id) WHERE status = 'pending';

-- +goose StatementBegin
-- policy_apply changes the policy row by changes, a JSON object of
-- key -> value as `policy set` takes them, and returns the policy before
-- and after. The table's CHECK constraints refuse values out of range.
CREATE FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unknown text;
BEGIN
    SELECT string_agg(k, ', ') INTO unknown FROM jsonb_object_keys(changes) k
     WHERE k NOT IN ('approvers', 'max_cohort', 'max_rate', 'approval_ttl', 'stop_failure_ratio', 'stop_queue_depth',
                     'stop_redead_ratio', 'canary_window', 'identity_mode', 'eligibility_query', 'retention');
    IF unknown IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('policy-keys', format('unknown policy keys: %s', unknown));
    END IF;
    SELECT to_jsonb(p) - 'singleton' INTO before FROM expiryctl.policy p WHERE singleton FOR UPDATE;
    UPDATE expiryctl.policy SET
        approvers = CASE WHEN changes ? 'approvers' THEN ARRAY(SELECT jsonb_array_elements_text(changes->'approvers')) ELSE approvers END,
        max_cohort = CASE WHEN changes ? 'max_cohort' THEN (changes->>'max_cohort')::integer ELSE max_cohort END,
        max_rate = CASE WHEN changes ? 'max_rate' THEN (changes->>'max_rate')::numeric ELSE max_rate END,
        approval_ttl = CASE WHEN changes ? 'approval_ttl' THEN (changes->>'approval_ttl')::interval ELSE approval_ttl END,
        stop_failure_ratio = CASE WHEN changes ? 'stop_failure_ratio' THEN (changes->>'stop_failure_ratio')::numeric ELSE stop_failure_ratio END,
        stop_queue_depth = CASE WHEN changes ? 'stop_queue_depth' THEN (changes->>'stop_queue_depth')::integer ELSE stop_queue_depth END,
        stop_redead_ratio = CASE WHEN changes ? 'stop_redead_ratio' THEN (changes->>'stop_redead_ratio')::numeric ELSE stop_redead_ratio END,
        canary_window = CASE WHEN changes ? 'canary_window' THEN (changes->>'canary_window')::interval ELSE canary_window END,
        identity_mode = CASE WHEN changes ? 'identity_mode' THEN changes->>'identity_mode' ELSE identity_mode END,
        eligibility_query = CASE WHEN changes ? 'eligibility_query' THEN changes->>'eligibility_query' ELSE eligibility_query END,
        retention = CASE WHEN changes ? 'retention' THEN (changes->>'retention')::interval ELSE retention END,
        updated_at = now(), updated_by = by_label
     WHERE singleton;
    SELECT to_jsonb(p) - 'singleton' INTO after FROM expiryctl.policy p WHERE singleton;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- policy_set is `policy set`: for the owner it applies the change at once;
-- for an admin it records a proposal that another admin must approve.
-- Returns the proposal's id (null when applied) and whether it applied.
CREATE FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text)
RETURNS TABLE (change_id bigint, applied boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy set', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    IF changes IS NULL OR jsonb_typeof(changes) <> 'object' OR changes = '{}' THEN
        PERFORM expiryctl.replay_refuse('policy-keys', 'name at least one KEY=VALUE');
    END IF;
    IF expiryctl.caller_is_owner() THEN
        SELECT * INTO r FROM expiryctl.policy_apply(changes, label);
        PERFORM expiryctl.audit_write(label, 'policy.set', 'policy', jsonb_build_object(
            'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
            'why', coalesce(why, ''), 'by_owner', true, 'before', r.before, 'after', r.after));
        change_id := NULL;
        applied := true;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Checked now, so that the proposer hears of a bad value, and again
    -- when it applies.
    BEGIN
        PERFORM expiryctl.policy_apply(changes, label);
        RAISE EXCEPTION USING ERRCODE = 'EG099';
    EXCEPTION WHEN SQLSTATE 'EG099' THEN
        NULL;
    END;
    INSERT INTO expiryctl.policy_changes (changes, why, proposed_by) VALUES (changes, coalesce(why, ''), label)
    RETURNING id INTO change_id;
    PERFORM expiryctl.audit_write(label, 'policy.propose', 'policy_change:' || change_id, jsonb_build_object(
        'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
        'why', coalesce(why, '')));
    applied := false;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- policy_review applies (approve) or drops (reject) a pending proposal; the
-- reviewer's login must differ from the proposer's.
CREATE FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text)
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

-- ---------------------------------------------------------------------------
-- Access: the owner makes logins members of the groups.

-- +goose StatementBegin
CREATE FUNCTION expiryctl.access_change(actor text, login text, groups text[], grant_it boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    g text;
    r record;
BEGIN
    IF NOT expiryctl.caller_is_owner() THEN
        PERFORM expiryctl.replay_refuse('owner-only', format(
            'only the schema owner manages access, and the login %s is not it', session_user));
    END IF;
    label := expiryctl.actor_label(actor);
    SELECT rolcanlogin, rolsuper INTO r FROM pg_roles WHERE rolname = login;
    IF NOT FOUND THEN
        PERFORM expiryctl.replay_refuse('login', format('there is no role %L: create the login first (CREATE ROLE %I LOGIN)', login, login));
    END IF;
    IF NOT r.rolcanlogin THEN
        PERFORM expiryctl.replay_refuse('login', format('%s is not a login role: grant groups to per-person logins', login));
    END IF;
    IF cardinality(groups) = 0 THEN
        PERFORM expiryctl.replay_refuse('groups', 'name at least one group: expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin');
    END IF;
    FOREACH g IN ARRAY groups LOOP
        IF g NOT IN ('expiryctl_ingester', 'expiryctl_operator', 'expiryctl_approver', 'expiryctl_auditor', 'expiryctl_admin') THEN
            PERFORM expiryctl.replay_refuse('groups', format(
                'unknown group %L: the groups are expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin', g));
        END IF;
        IF grant_it THEN
            EXECUTE format('GRANT %I TO %I', g, login);
        ELSE
            EXECUTE format('REVOKE %I FROM %I', g, login);
        END IF;
    END LOOP;
    PERFORM expiryctl.audit_write(label, CASE WHEN grant_it THEN 'access.grant' ELSE 'access.revoke' END,
        'login:' || login, jsonb_build_object('login', login, 'groups', to_jsonb(groups), 'superuser', r.rolsuper));
END
$$;
-- +goose StatementEnd

-- ---------------------------------------------------------------------------
-- Privileges. Nothing of the schema is PUBLIC's; each group reads what its
-- commands read and writes only through the functions granted to it.

REVOKE ALL ON ALL TABLES IN SCHEMA expiryctl FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA expiryctl FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA expiryctl FROM PUBLIC;
REVOKE ALL ON SCHEMA expiryctl FROM PUBLIC;

GRANT USAGE ON SCHEMA expiryctl TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
GRANT SELECT ON expiryctl.schema_version, expiryctl.policy, expiryctl.policy_changes
    TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
GRANT SELECT ON expiryctl.dead_letters, expiryctl.dead_letter_tallies, expiryctl.replay_requests, expiryctl.replay_items
    TO expiryctl_operator, expiryctl_approver, expiryctl_admin;
GRANT SELECT ON expiryctl.replay_requests, expiryctl.replay_items TO expiryctl_auditor;
-- The ingester reads the archive only to link a letter to its job's earlier
-- row, which ingest_letters does as the owner.
GRANT SELECT ON expiryctl.audit_log TO expiryctl_auditor, expiryctl_operator, expiryctl_approver, expiryctl_admin;

-- Read helpers the groups' queries call.
GRANT EXECUTE ON FUNCTION expiryctl.replay_cohort_changes(bigint), expiryctl.caller_in(text[]),
    expiryctl.caller_is_owner(), expiryctl.audit_canonical(bigint, timestamptz, text, text, text, text, jsonb, text, bytea)
    TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;

GRANT EXECUTE ON FUNCTION expiryctl.audit_append(text, text, text, jsonb, text),
    expiryctl.replay_expire_stale(text)
    TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
GRANT EXECUTE ON FUNCTION expiryctl.ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[],
    timestamptz[], text[], text[], text[], text[], text[], text[], text[], int[], text[], text[], text[], bytea[],
    timestamptz[], bigint[], int[]) TO expiryctl_ingester;
GRANT EXECUTE ON FUNCTION expiryctl.purge_letters(text, timestamptz, integer) TO expiryctl_operator, expiryctl_admin;
GRANT EXECUTE ON FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean),
    expiryctl.replay_run_start(text, bigint),
    expiryctl.replay_items_mark(bigint, integer, integer, bigint[], bigint[], text[], bigint[], text[]),
    expiryctl.replay_items_record(bigint, integer, integer, bigint[], bigint[], text[]),
    expiryctl.replay_run_interrupted(text, bigint, bigint[], jsonb),
    expiryctl.replay_run_halt(text, bigint, text, bigint[], jsonb),
    expiryctl.replay_run_complete(text, bigint, jsonb),
    expiryctl.replay_discard_window(bigint, integer, integer),
    expiryctl.replay_run_acked_after_cancel(text, bigint, bigint[])
    TO expiryctl_operator;
GRANT EXECUTE ON FUNCTION expiryctl.replay_cancel(text, bigint, text) TO expiryctl_operator, expiryctl_approver;
GRANT EXECUTE ON FUNCTION expiryctl.replay_review(text, bigint, text, text, boolean, bytea) TO expiryctl_approver;
GRANT EXECUTE ON FUNCTION expiryctl.policy_set(text, jsonb, text), expiryctl.policy_review(text, bigint, text, text)
    TO expiryctl_admin;

-- Functions created later by expiryctl migrations are no one's until granted.
ALTER DEFAULT PRIVILEGES IN SCHEMA expiryctl REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- +goose Down
ALTER DEFAULT PRIVILEGES IN SCHEMA expiryctl GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
GRANT USAGE ON SCHEMA expiryctl TO PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA expiryctl TO PUBLIC;
DROP FUNCTION expiryctl.access_change(text, text, text[], boolean);
DROP FUNCTION expiryctl.policy_review(text, bigint, text, text);
DROP FUNCTION expiryctl.policy_set(text, jsonb, text);
DROP FUNCTION expiryctl.policy_apply(jsonb, text);
DROP TABLE expiryctl.policy_changes;
DROP FUNCTION expiryctl.replay_run_acked_after_cancel(text, bigint, bigint[]);
DROP FUNCTION expiryctl.replay_discard_window(bigint, integer, integer);
DROP FUNCTION expiryctl.replay_run_complete(text, bigint, jsonb);
DROP FUNCTION expiryctl.replay_run_halt(text, bigint, text, bigint[], jsonb);
DROP FUNCTION expiryctl.replay_run_interrupted(text, bigint, bigint[], jsonb);
DROP FUNCTION expiryctl.replay_items_record(bigint, integer, integer, bigint[], bigint[], text[]);
DROP FUNCTION expiryctl.replay_items_mark(bigint, integer, integer, bigint[], bigint[], text[], bigint[], text[]);
DROP FUNCTION expiryctl.replay_run_start(text, bigint);
DROP FUNCTION expiryctl.replay_run_lease(bigint);
DROP FUNCTION expiryctl.replay_cancel(text, bigint, text);
DROP FUNCTION expiryctl.replay_review(text, bigint, text, text, boolean, bytea);
DROP FUNCTION expiryctl.replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean);
DROP FUNCTION expiryctl.letters_matching(jsonb);
DROP FUNCTION expiryctl.replay_expire_stale(text);
DROP TRIGGER replay_items_no_early_close ON expiryctl.replay_items;
DROP FUNCTION expiryctl.replay_items_refuse_early_close();
DROP TRIGGER replay_items_no_rewrite ON expiryctl.replay_items;
DROP FUNCTION expiryctl.replay_items_refuse_rewrite();
DROP TRIGGER replay_items_moves ON expiryctl.replay_items;
DROP FUNCTION expiryctl.replay_items_refuse_move();
ALTER TABLE expiryctl.replay_requests DROP CONSTRAINT four_eyes_login, DROP COLUMN started_db_role;
DROP FUNCTION expiryctl.purge_letters(text, timestamptz, integer);
DROP FUNCTION expiryctl.ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[],
    timestamptz[], text[], text[], text[], text[], text[], text[], text[], int[], text[], text[], text[], bytea[],
    timestamptz[], bigint[], int[]);
DROP TRIGGER dead_letters_no_truncate ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_no_delete ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
DROP FUNCTION expiryctl.dead_letters_refuse_change();
DROP FUNCTION expiryctl.audit_write(text, text, text, jsonb, text);
DROP FUNCTION expiryctl.audit_append(text, text, text, jsonb, text);
DROP FUNCTION expiryctl.audit_reserved(text);
DROP FUNCTION expiryctl.actor_label(text);
DROP FUNCTION expiryctl.refuse_text(text, text);
DROP FUNCTION expiryctl.require_role(text, text[]);
DROP FUNCTION expiryctl.caller_in(text[]);
DROP FUNCTION expiryctl.caller_is_owner();
-- The request guard of 00003 is not restored: it compared labels for
-- four-eyes, which is what this migration exists to end. The groups stay:
-- they are the cluster's, and other databases may use them.
