-- replay_run_acquire takes a request's runner lease for the calling
-- session, the runner's lock session: true when it holds it now (it was
-- free, its holder's session is gone, or this session held it already),
-- false when another session that still stands holds it. The lease is a
-- row only the schema's functions write, so no login outside the API can
-- hold it to block a run (an advisory key, which it was until migration
-- 00022, is any login's to take). It waits only on another acquire of the
-- same request, which is one statement.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_acquire(request bigint, application text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '10s' AS $$
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    INSERT INTO expiryctl.replay_runner_leases AS l (request_id, pid, login, application)
    VALUES (request, pg_backend_pid(), session_user, coalesce(left(application, 63), ''))
    ON CONFLICT (request_id) DO UPDATE
       SET pid = excluded.pid, login = excluded.login, application = excluded.application, taken_at = now()
     WHERE l.pid = pg_backend_pid()
        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.pid AND a.usename = l.login);
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_acquire(request bigint, application text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_acquire(request bigint, application text) TO expiryctl_operator;
