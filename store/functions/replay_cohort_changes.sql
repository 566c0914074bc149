-- replay_cohort_changes lists the letters of a request's cohort that are
-- no longer as the requester froze them: deleted, redacted, with another
-- payload, discarded, or dead-lettered again since. The guard refuses to
-- approve or run a request that has any; replay show names them.
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

REVOKE ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
