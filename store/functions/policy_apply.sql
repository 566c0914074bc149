-- policy_apply writes a change to the policy row, refusing unknown keys,
-- and returns the row before and after. It is no API of its own (no group
-- may call it): policy_set applies the owner's changes through it and
-- policy_review an approved proposal's. job_tables is merged, not
-- replaced: a change names the jobs tables whose mapping it sets, and a
-- null mapping removes one, so that proposals for two tables do not undo
-- each other.
CREATE OR REPLACE FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unknown text;
    bad_tables text;
BEGIN
    SELECT string_agg(k, ', ') INTO unknown FROM jsonb_object_keys(changes) k
     WHERE k NOT IN ('approvers', 'max_cohort', 'max_rate', 'approval_ttl', 'stop_failure_ratio', 'stop_queue_depth',
                     'stop_redead_ratio', 'canary_window', 'identity_mode', 'eligibility_query', 'retention',
                     'outcome_query', 'outcome_window', 'stop_unsettled_ratio', 'stop_conflict_ratio', 'signed_approvals', 'gap_query',
                     'job_tables');
    IF unknown IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('policy-keys', format('unknown policy keys: %s', unknown));
    END IF;
    IF changes ? 'job_tables' THEN
        IF jsonb_typeof(changes->'job_tables') <> 'object' THEN
            PERFORM expiryctl.replay_refuse('policy-keys', 'job_tables takes an object of mappings by queue name (jobtable://CONNECTION/SCHEMA.TABLE)');
        END IF;
        SELECT string_agg(quote_literal(k), ', ' ORDER BY k) INTO bad_tables FROM jsonb_each(changes->'job_tables') AS t(k, v)
         WHERE k !~ '^jobtable://[^/?#]+/[^/?#]+\.[^/?#]+$' AND k NOT LIKE 'jobtable://%/%/%'
            OR jsonb_typeof(v) NOT IN ('object', 'null');
        IF bad_tables IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('policy-keys', format('job_tables names %s: each key is a jobs table''s queue name, '
                || 'jobtable://CONNECTION/SCHEMA.TABLE, and each value its mapping (an object), or null to remove it', bad_tables));
        END IF;
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
        signed_approvals = CASE WHEN changes ? 'signed_approvals' THEN (changes->>'signed_approvals')::boolean ELSE signed_approvals END,
        gap_query = CASE WHEN changes ? 'gap_query' THEN changes->>'gap_query' ELSE gap_query END,
        job_tables = CASE WHEN changes ? 'job_tables'
                          THEN (SELECT coalesce(jsonb_object_agg(k, v), '{}') FROM jsonb_each(job_tables || (changes->'job_tables')) AS t(k, v)
                                 WHERE jsonb_typeof(v) <> 'null')
                          ELSE job_tables END,
        updated_at = now(), updated_by = by_label
     WHERE singleton;
    SELECT to_jsonb(p) - 'singleton' INTO after FROM expiryctl.policy p WHERE singleton;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb) FROM PUBLIC;
