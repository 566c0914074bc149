-- replay_run_lease refuses (rule single-runner) a caller whose login holds
-- no standing session with the request's runner lease
-- (replay_run_acquire): only the run that holds the lease moves the
-- request's items. The run writes through pooled sessions of the lease
-- holder's login, so any session of that login passes.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_lease(request bigint) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM expiryctl.replay_runner_leases l JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
                    WHERE l.request_id = request AND l.login = session_user) THEN
        PERFORM expiryctl.replay_refuse('single-runner', format(
            'no session of the login %s holds the runner lease of replay request %s: only its runner moves its items (`expiryctl replay run %s`)',
            session_user, request, request));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_lease(request bigint) FROM PUBLIC;
