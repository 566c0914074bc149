-- replay_item_not_before is the earliest time an item of a request may be
-- published: the request's not_before, and, unless it says
-- include_not_due, the Retry-After its letter's last error carried and
-- the hold's deadline (due_at). NULL: any time. The runner waits for it
-- (reading it beside now(), so that its own clock does not matter), and
-- replay_items_send refuses to clear a publish before it. A standard SQL
-- body and no SET, so that the planner inlines it (see work_queue_of).
CREATE OR REPLACE FUNCTION expiryctl.replay_item_not_before(request_not_before timestamptz, include_not_due boolean,
    retry_after timestamptz, due_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN greatest(request_not_before, CASE WHEN NOT include_not_due THEN greatest(retry_after, due_at) END);

REVOKE ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamptz, include_not_due boolean, retry_after timestamptz, due_at timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamptz, include_not_due boolean, retry_after timestamptz, due_at timestamptz) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
