-- audit_append is how a command records what it did: its reads and
-- reports, and the refusals and failures of anything. It is on every
-- command's path, and a command runs in a new session, where every catalog
-- it touches is read afresh: so it is one plain-SQL statement, membership
-- is left to EXECUTE (granted to the five groups only), the policy is read
-- only for a label that is not the login, and PL/pgSQL loads only for a
-- refusal.
--
-- What a client may write is an allowlist, compared byte for byte: an "ok"
-- row only of the client-reported actions below (reads, and reports that
-- change nothing: a capture's or a purge's summary, whose batches the
-- database writes itself, a failover seen by a runner, a migration's
-- summary); a "refused" or "error" row of those, of a governance action
-- (a refused approval is a client's to report) or of `replay run` refused
-- before it started; and no other outcome.
-- Every governance event's "ok" row is written only by the function that
-- makes the change, in its transaction: so an action that differs from a
-- reserved one only by case or spaces ('Replay.Approve ', 'OK') is refused,
-- never recorded as something an auditor might read as the real one.
-- The details' "build" is the session's (audit_build), never the caller's:
-- a client names its build once, when it connects, for every row.
CREATE OR REPLACE FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text)
RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    SELECT CASE
               WHEN coalesce(btrim(actor), '') = '' THEN session_user::text
               WHEN actor = session_user THEN actor
               ELSE expiryctl.actor_label(actor)
           END,
           CASE
               WHEN action IN ('dlq.summary', 'dlq.list', 'dlq.show', 'dlq.ingest', 'dlq.purge', 'replay.show', 'replay.list',
                    'replay.plan', 'replay.dry_run', 'replay.run.failover', 'policy.show', 'access.list', 'audit.list',
                    'audit.verify', 'audit.export', 'audit.reconcile', 'metrics.serve', 'tui.open', 'demo.run',
                    'schema.migrate', 'schema.migrate.down')
                    AND outcome IN ('ok', 'refused', 'error')
                   THEN action
               WHEN action IN ('replay.request', 'replay.approve', 'replay.reject', 'replay.cancel', 'replay.expire',
                    'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled', 'replay.halt', 'replay.canary.start',
                    'replay.canary.pass', 'replay.complete', 'policy.set', 'policy.propose', 'policy.approve', 'policy.reject',
                    'access.grant', 'access.revoke', 'dlq.ingest.batch', 'dlq.purge.batch', 'audit.checkpoint',
                    'migrate.governance', 'replay.run')
                    AND outcome IN ('refused', 'error')
                   THEN action
               WHEN lower(regexp_replace(action, '\s', '', 'g')) IN ('replay.request', 'replay.approve', 'replay.reject',
                    'replay.cancel', 'replay.expire', 'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled',
                    'replay.halt', 'replay.canary.start', 'replay.canary.pass', 'replay.complete', 'policy.set',
                    'policy.propose', 'policy.approve', 'policy.reject', 'access.grant', 'access.revoke', 'dlq.ingest.batch',
                    'dlq.purge.batch', 'audit.checkpoint', 'migrate.governance')
                   THEN expiryctl.refuse_text('audit-reserved', format(
                       'an %L %L row is written only by the database function that makes the change, in the same transaction; a client records only its refusals and failures, as outcome ''refused'' or ''error''',
                       outcome, action))
               WHEN outcome NOT IN ('ok', 'refused', 'error')
                   THEN expiryctl.refuse_text('audit-outcome', format(
                       'outcome %L is not one of ok, refused, error', outcome))
               ELSE expiryctl.refuse_text('audit-action', format(
                   'action %L is not one a client records: the trail takes the actions of docs/audit.md, spelt exactly', action))
           END,
           coalesce(target, ''), (coalesce(details, '{}') - 'build') || expiryctl.audit_build(), outcome
    RETURNING audit_log.seq, encode(audit_log.hash, 'hex')
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
