-- replay_retries_in_place says whether a replay of a letter of the queue
-- system named system retries the job where its store keeps it rather
-- than publishing a copy, as queue_systems describes the system (which
-- only the migrate writes, from the drivers of its release): the runner
-- decides between a retry and a publish by it, never by what a letter
-- says. A system the table does not hold is false. STABLE and without a
-- search_path of its own, naming its table with the schema, so that the
-- planner inlines it into the runner's item reads; it reads queue_systems
-- with the caller's privileges, which every group has.
CREATE OR REPLACE FUNCTION expiryctl.replay_retries_in_place(system text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce((SELECT q.retries_in_place FROM expiryctl.queue_systems q WHERE q.name OPERATOR(pg_catalog.=) system), false)
$$;
REVOKE ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_retries_in_place(system text) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
