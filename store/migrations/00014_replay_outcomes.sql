-- +goose Up
-- Outcomes watched (issue 14): a run saw only its publishes and the letters
-- that died again, never whether the reservations reached their terminal
-- state, or how late. The policy gains an outcome query, run against the
-- reservation database for the items a run confirmed, with $1
-- reservation_id, $2 idempotency_key, $3 expected_version and $4 the time
-- the runner published the item, returning (terminal_at timestamptz or
-- null, duplicate boolean); the window an item has to reach its terminal
-- state; and two stop conditions over what it answers. They change only
-- through policy_set / policy_review, as every other key: policy_apply is
-- redefined to know them. The query's database URL is never stored here
-- (it may carry a password): `replay run --outcome-url` names it.
ALTER TABLE expiryctl.policy
    ADD COLUMN outcome_query text NOT NULL DEFAULT '',
    ADD COLUMN outcome_window interval NOT NULL DEFAULT '5 minutes'
        CONSTRAINT policy_outcome_window_check CHECK (outcome_window > '0'),
    ADD COLUMN stop_unsettled_ratio numeric NOT NULL DEFAULT 0.05
        CONSTRAINT policy_stop_unsettled_ratio_check CHECK (stop_unsettled_ratio >= 0 AND stop_unsettled_ratio <= 1),
    ADD COLUMN stop_conflict_ratio numeric NOT NULL DEFAULT 0.2
        CONSTRAINT policy_stop_conflict_ratio_check CHECK (stop_conflict_ratio >= 0 AND stop_conflict_ratio <= 1);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unknown text;
BEGIN
    SELECT string_agg(k, ', ') INTO unknown FROM jsonb_object_keys(changes) k
     WHERE k NOT IN ('approvers', 'max_cohort', 'max_rate', 'approval_ttl', 'stop_failure_ratio', 'stop_queue_depth',
                     'stop_redead_ratio', 'canary_window', 'identity_mode', 'eligibility_query', 'retention',
                     'outcome_query', 'outcome_window', 'stop_unsettled_ratio', 'stop_conflict_ratio');
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
        outcome_query = CASE WHEN changes ? 'outcome_query' THEN changes->>'outcome_query' ELSE outcome_query END,
        outcome_window = CASE WHEN changes ? 'outcome_window' THEN (changes->>'outcome_window')::interval ELSE outcome_window END,
        stop_unsettled_ratio = CASE WHEN changes ? 'stop_unsettled_ratio' THEN (changes->>'stop_unsettled_ratio')::numeric ELSE stop_unsettled_ratio END,
        stop_conflict_ratio = CASE WHEN changes ? 'stop_conflict_ratio' THEN (changes->>'stop_conflict_ratio')::numeric ELSE stop_conflict_ratio END,
        updated_at = now(), updated_by = by_label
     WHERE singleton;
    SELECT to_jsonb(p) - 'singleton' INTO after FROM expiryctl.policy p WHERE singleton;
END
$$;
-- +goose StatementEnd

-- replay_outcomes holds what the outcome query said of each item a run
-- confirmed, once it is decided: terminal (terminal_at set; late when after
-- window_ends_at), or still not terminal when its window ended
-- (terminal_at null; a later answer may still fill it in while the run
-- lasts). duplicate says the transition was not this replay's: the
-- idempotency key was already recorded. Times are the runner's (published,
-- confirmed) and the reservation database's (terminal_at); latency is from
-- the broker's confirm to the transition, never below zero.
CREATE TABLE expiryctl.replay_outcomes (
    request_id       bigint      NOT NULL,
    dead_letter_id   bigint      NOT NULL,
    approval         integer     NOT NULL, -- the request's approval the run ran under
    published_at     timestamptz NOT NULL,
    confirmed_at     timestamptz NOT NULL,
    window_ends_at   timestamptz NOT NULL,
    terminal_at      timestamptz,
    duplicate        boolean     NOT NULL DEFAULT false,
    latency          interval GENERATED ALWAYS AS (greatest(terminal_at - confirmed_at, interval '0')) STORED,
    observed_at      timestamptz NOT NULL DEFAULT now(),
    recorded_db_role text        NOT NULL DEFAULT session_user,
    PRIMARY KEY (request_id, dead_letter_id),
    FOREIGN KEY (request_id, dead_letter_id) REFERENCES expiryctl.replay_items (request_id, dead_letter_id),
    CONSTRAINT replay_outcomes_times CHECK (confirmed_at >= published_at AND window_ends_at >= confirmed_at)
);
COMMENT ON TABLE expiryctl.replay_outcomes IS
    'What the policy''s outcome query said of each item a run confirmed; written only by replay_outcomes_record.';
CREATE TRIGGER replay_outcomes_no_truncate BEFORE TRUNCATE ON expiryctl.replay_outcomes
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

-- +goose StatementBegin
-- replay_outcomes_record writes a batch of decided outcomes for a running
-- request, as its runner: the caller must be an operator whose login holds
-- the request's runner lock, and every item must be one the run confirmed.
-- A row already terminal never changes; one written "not terminal" takes
-- the terminal answer that comes later.
CREATE FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamptz[],
    confirmed_ats timestamptz[], window_ends timestamptz[], terminal_ats timestamptz[], duplicates boolean[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    wanted integer;
    known integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: outcomes are recorded only by the run of a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(letters) IS DISTINCT FROM cardinality(published_ats) OR cardinality(letters) IS DISTINCT FROM cardinality(confirmed_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(window_ends) OR cardinality(letters) IS DISTINCT FROM cardinality(terminal_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(duplicates) THEN
        RAISE EXCEPTION 'replay_outcomes_record: the arrays differ in length';
    END IF;
    SELECT count(DISTINCT l) INTO wanted FROM unnest(letters) l;
    SELECT count(*) INTO known FROM expiryctl.replay_items i
     WHERE i.request_id = request AND i.dead_letter_id = ANY (letters) AND i.state = 'confirmed';
    IF known <> wanted THEN
        PERFORM expiryctl.replay_refuse('confirmed-items', format(
            '%s of the %s letters are not confirmed items of replay request %s: an outcome belongs to an item the run confirmed',
            wanted - known, wanted, request));
    END IF;
    INSERT INTO expiryctl.replay_outcomes AS o (request_id, dead_letter_id, approval, published_at, confirmed_at,
                                                window_ends_at, terminal_at, duplicate)
    SELECT request, u.id, req.approvals, u.published_at, u.confirmed_at, u.window_ends_at, u.terminal_at, coalesce(u.duplicate, false)
      FROM unnest(letters, published_ats, confirmed_ats, window_ends, terminal_ats, duplicates)
           AS u(id, published_at, confirmed_at, window_ends_at, terminal_at, duplicate)
    ON CONFLICT (request_id, dead_letter_id) DO UPDATE
       SET terminal_at = excluded.terminal_at, duplicate = excluded.duplicate, observed_at = now()
     WHERE o.terminal_at IS NULL AND excluded.terminal_at IS NOT NULL;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION expiryctl.replay_outcomes_record(bigint, bigint[], timestamptz[], timestamptz[], timestamptz[], timestamptz[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_outcomes_record(bigint, bigint[], timestamptz[], timestamptz[], timestamptz[], timestamptz[], boolean[])
    TO expiryctl_operator;

-- Read as replay_items is.
GRANT SELECT ON expiryctl.replay_outcomes TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;

-- +goose Down
DROP FUNCTION expiryctl.replay_outcomes_record(bigint, bigint[], timestamptz[], timestamptz[], timestamptz[], timestamptz[], boolean[]);
DROP TABLE expiryctl.replay_outcomes;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb)
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
ALTER TABLE expiryctl.policy
    DROP COLUMN stop_conflict_ratio,
    DROP COLUMN stop_unsettled_ratio,
    DROP COLUMN outcome_window,
    DROP COLUMN outcome_query;
