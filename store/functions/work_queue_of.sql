-- work_queue_of is the work queue that queue belongs to in the expiry
-- topology (docs/message-contract.md): queue without its ".retry.<ms>" or
-- ".dlq" suffix, or queue itself. A job that went through retries first
-- died in a retry queue; it is the work queue that failed it. replay's
-- WorkQueueOf says the same for the queues a run watches. A standard SQL
-- body, bound when it is created, and no SET: the planner inlines it into
-- the runner's item reads, where a call an item was most of their cost.
CREATE OR REPLACE FUNCTION expiryctl.work_queue_of(queue text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(nullif(pg_catalog.regexp_replace(queue, '(\.retry\.[0-9]+|\.dlq)$', ''), ''), queue);

REVOKE ALL ON FUNCTION expiryctl.work_queue_of(queue text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
