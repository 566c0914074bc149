-- work_queue_of is the work queue that queue belongs to in the expiry
-- topology (docs/message-contract.md): queue without its ".retry.<ms>" or
-- ".dlq" suffix, or queue itself. A job that went through retries first
-- died in a retry queue; it is the work queue that failed it. replay's
-- WorkQueueOf says the same for the queues a run watches.
CREATE OR REPLACE FUNCTION expiryctl.work_queue_of(queue text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(nullif(regexp_replace(queue, '(\.retry\.[0-9]+|\.dlq)$', ''), ''), queue)
$$;

REVOKE ALL ON FUNCTION expiryctl.work_queue_of(queue text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
