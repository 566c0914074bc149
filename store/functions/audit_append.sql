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

REVOKE ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
