-- Governed replay: requests with a frozen cohort, approved by a second person,
-- run once. The rules that matter are enforced here, so that no client can
-- bypass them: four-eyes, approvers from policy, expiry, single review,
-- frozen cohort, one open request per letter, single-use approvals.

-- +goose Up
CREATE TABLE expiryctl.replay_requests (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind               text        NOT NULL CHECK (kind IN ('replay', 'discard')),
    -- The filter (or id list) exactly as the requester wrote it.
    filter             jsonb       NOT NULL DEFAULT '{}',
    item_count         integer     NOT NULL CHECK (item_count > 0),
    -- sha256 over the frozen (dead letter id, payload sha256) pairs in id order.
    cohort_hash        bytea       NOT NULL,
    rate               numeric     NOT NULL CHECK (rate > 0),
    canary             integer     NOT NULL DEFAULT 1 CHECK (canary >= 0),
    stop_failure_ratio numeric     NOT NULL,
    stop_queue_depth   integer     NOT NULL,
    stop_redead_ratio  numeric     NOT NULL,
    canary_window      interval    NOT NULL,
    fresh_key          boolean     NOT NULL DEFAULT false,
    eligibility_confirmed boolean  NOT NULL DEFAULT false,
    to_exchange        text,
    to_routing_key     text,
    why                text        NOT NULL CHECK (length(btrim(why)) > 0),
    requested_by       text        NOT NULL,
    requested_db_role  text        NOT NULL DEFAULT session_user,
    created_at         timestamptz NOT NULL DEFAULT now(),
    created_xid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    expires_at         timestamptz NOT NULL,
    status             text        NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending', 'approved', 'rejected', 'expired', 'running', 'halted', 'completed', 'cancelled')),
    reviewed_by        text,
    reviewed_db_role   text,
    reviewed_at        timestamptz,
    review_why         text,
    -- An approval authorises one run; starting the run spends it.
    approval_spent     boolean     NOT NULL DEFAULT false,
    -- An approval must be used (the run started) before this time.
    approval_expires_at timestamptz,
    approvals          integer     NOT NULL DEFAULT 0,
    started_at         timestamptz,
    finished_at        timestamptz,
    halt_reason        text,
    CHECK (fresh_key = false OR eligibility_confirmed),
    CHECK (fresh_key = false OR kind = 'replay'),
    -- Four-eyes, as a constraint: no path through any client can record the
    -- requester as their own reviewer.
    CONSTRAINT four_eyes CHECK (reviewed_by IS NULL OR reviewed_by <> requested_by),
    CONSTRAINT four_eyes_db_role CHECK (
        reviewed_db_role IS NULL OR reviewed_db_role <> requested_db_role OR reviewed_by <> requested_by)
);

CREATE INDEX replay_requests_status ON expiryctl.replay_requests (status, id DESC);

CREATE TABLE expiryctl.replay_items (
    request_id      bigint      NOT NULL REFERENCES expiryctl.replay_requests (id),
    dead_letter_id  bigint      NOT NULL REFERENCES expiryctl.dead_letters (id),
    ordinal         integer     NOT NULL,
    payload_sha256  bytea       NOT NULL,
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN (
        'pending', 'publishing', 'confirmed', 'failed', 'skipped')),
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text,
    confirmed_at    timestamptz,
    -- open while the request may still act on the letter; cleared when the
    -- request ends, so that the letter can join another request.
    open            boolean     NOT NULL DEFAULT true,
    PRIMARY KEY (request_id, dead_letter_id),
    UNIQUE (request_id, ordinal)
-- Room on each page for the run's state updates to stay HOT (no indexed
-- column changes), which a 50,000-item run does three times per item.
) WITH (fillfactor = 70);

-- A dead letter belongs to at most one open request.
CREATE UNIQUE INDEX replay_items_one_open_request ON expiryctl.replay_items (dead_letter_id) WHERE open;

-- +goose StatementBegin
CREATE FUNCTION expiryctl.replay_refuse(rule text, message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- SQLSTATE EG001 marks a governance refusal; the detail names the rule so
    -- that expiryctl (or any client) can say which rule refused.
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- replay_cohort_changes lists, for a request, the letters whose state no longer
-- matches what was frozen: redacted, discarded, replayed elsewhere, payload
-- changed, or dead-lettered again since (a newer incarnation exists).
CREATE FUNCTION expiryctl.replay_cohort_changes(req bigint)
RETURNS TABLE (dead_letter_id bigint, change text)
LANGUAGE sql STABLE AS $$
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
CREATE FUNCTION expiryctl.replay_request_guard() RETURNS trigger
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

    -- Identity and the frozen definition never change after creation.
    IF NEW.kind IS DISTINCT FROM OLD.kind OR NEW.filter IS DISTINCT FROM OLD.filter
       OR NEW.item_count IS DISTINCT FROM OLD.item_count OR NEW.cohort_hash IS DISTINCT FROM OLD.cohort_hash
       OR NEW.rate IS DISTINCT FROM OLD.rate OR NEW.canary IS DISTINCT FROM OLD.canary
       OR NEW.fresh_key IS DISTINCT FROM OLD.fresh_key OR NEW.to_exchange IS DISTINCT FROM OLD.to_exchange
       OR NEW.to_routing_key IS DISTINCT FROM OLD.to_routing_key OR NEW.requested_by IS DISTINCT FROM OLD.requested_by
       OR NEW.requested_db_role IS DISTINCT FROM OLD.requested_db_role OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.why IS DISTINCT FROM OLD.why
       OR NEW.stop_failure_ratio IS DISTINCT FROM OLD.stop_failure_ratio
       OR NEW.stop_queue_depth IS DISTINCT FROM OLD.stop_queue_depth
       OR NEW.stop_redead_ratio IS DISTINCT FROM OLD.stop_redead_ratio
       OR NEW.canary_window IS DISTINCT FROM OLD.canary_window
       OR NEW.eligibility_confirmed IS DISTINCT FROM OLD.eligibility_confirmed THEN
        PERFORM expiryctl.replay_refuse('frozen-request', format('replay request %s is frozen: its cohort and limits cannot be changed', OLD.id));
    END IF;

    IF NEW.status = OLD.status THEN
        IF NEW.reviewed_by IS DISTINCT FROM OLD.reviewed_by THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s: it was already reviewed by %s', OLD.id, OLD.status, coalesce(OLD.reviewed_by, 'nobody')));
        END IF;
        IF NEW.approval_spent IS DISTINCT FROM OLD.approval_spent OR NEW.approvals IS DISTINCT FROM OLD.approvals
           OR NEW.approval_expires_at IS DISTINCT FROM OLD.approval_expires_at THEN
            PERFORM expiryctl.replay_refuse('single-use-approval', format(
                'the approval of replay request %s changes only through a review or the start of a run', OLD.id));
        END IF;
        RETURN NEW;
    END IF;

    -- Reviews: pending -> approved | rejected; a halted run needs a new approval.
    IF NEW.status IN ('approved', 'rejected') THEN
        IF OLD.status NOT IN ('pending', 'halted') THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s, not pending: it was already reviewed', OLD.id, OLD.status));
        END IF;
        IF now() >= OLD.expires_at AND OLD.status = 'pending' THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'replay request %s expired at %s: ask the requester to make a new one', OLD.id, OLD.expires_at));
        END IF;
        IF NEW.reviewed_by IS NULL OR NEW.reviewed_by = OLD.requested_by THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                '%s requested replay request %s and cannot review it: another approver must', OLD.requested_by, OLD.id));
        END IF;
        IF pol.identity_mode = 'db-role' AND (NEW.reviewed_by <> session_user OR session_user = OLD.requested_db_role) THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the reviewer must be the database role %s and differ from the requester''s role %s',
                session_user, OLD.requested_db_role));
        END IF;
        IF NOT (NEW.reviewed_by = ANY (pol.approvers)) THEN
            PERFORM expiryctl.replay_refuse('approvers', format(
                '%s is not an approver under the policy (approvers: %s)', NEW.reviewed_by,
                coalesce(nullif(array_to_string(pol.approvers, ', '), ''), 'none configured')));
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
            -- Why an earlier run halted stays in the audit trail; the request
            -- shows only its current state.
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

CREATE TRIGGER replay_requests_guard BEFORE INSERT OR UPDATE ON expiryctl.replay_requests
    FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_request_guard();

-- +goose StatementBegin
-- When a request ends, its letters are free again: those not replayed or
-- discarded go back to "dead".
CREATE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letters d SET status = 'dead'
          FROM expiryctl.replay_items i
         WHERE i.request_id = NEW.id AND i.dead_letter_id = d.id AND i.open
           AND d.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replay_requests_ended AFTER UPDATE OF status ON expiryctl.replay_requests
    FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_request_ended();

-- +goose StatementBegin
-- The cohort is frozen: items are written only in the transaction that
-- created their request, never deleted, and only their run state changes.
CREATE FUNCTION expiryctl.replay_items_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', 'replay items are never deleted');
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO req FROM expiryctl.replay_requests WHERE id = NEW.request_id;
        IF req.created_xid <> pg_current_xact_id() THEN
            PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                'the cohort of replay request %s was frozen when it was made: nothing can be added', NEW.request_id));
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.request_id <> OLD.request_id OR NEW.dead_letter_id <> OLD.dead_letter_id
       OR NEW.ordinal <> OLD.ordinal OR NEW.payload_sha256 <> OLD.payload_sha256 THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', format('the cohort of replay request %s is frozen', OLD.request_id));
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Items move (publishing, confirmed, failed, skipped) only while their
-- request runs. Checked once per statement rather than once per row: a run
-- updates its items in chunks of up to a thousand.
CREATE FUNCTION expiryctl.replay_items_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.request_id, r.status INTO bad
    FROM new_rows n
    JOIN old_rows o ON o.request_id = n.request_id AND o.dead_letter_id = n.dead_letter_id
    JOIN expiryctl.replay_requests r ON r.id = n.request_id
    WHERE n.state <> o.state AND n.state IN ('publishing', 'confirmed', 'failed', 'skipped')
      AND r.status <> 'running'
    LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: items move only while it runs', bad.request_id, bad.status));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replay_items_guard BEFORE INSERT OR UPDATE OR DELETE ON expiryctl.replay_items
    FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_items_guard();
CREATE TRIGGER replay_items_state_guard AFTER UPDATE ON expiryctl.replay_items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.replay_items_state_guard();
CREATE TRIGGER replay_items_no_truncate BEFORE TRUNCATE ON expiryctl.replay_items
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

CREATE INDEX dead_letters_previous ON expiryctl.dead_letters (previous_id) WHERE previous_id IS NOT NULL;
CREATE INDEX dead_letters_replay_request ON expiryctl.dead_letters (replay_request_id) WHERE replay_request_id IS NOT NULL;

-- +goose Down
DROP TABLE expiryctl.replay_items;
DROP TABLE expiryctl.replay_requests;
DROP FUNCTION expiryctl.replay_items_guard();
DROP FUNCTION expiryctl.replay_items_state_guard();
DROP FUNCTION expiryctl.replay_request_ended();
DROP FUNCTION expiryctl.replay_request_guard();
DROP FUNCTION expiryctl.replay_cohort_changes(bigint);
DROP FUNCTION expiryctl.replay_refuse(text, text);
DROP INDEX expiryctl.dead_letters_previous;
DROP INDEX expiryctl.dead_letters_replay_request;
