-- replay_run_lease refuses (rule single-runner) a caller whose login holds
-- no session with the request's runner lock: only the run that holds the
-- lock moves the request's items.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_lease(request bigint) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.classid::int8 = 1380994137 AND l.objid::int8 = request & 4294967295
                      AND a.usename = session_user) THEN
        PERFORM expiryctl.replay_refuse('single-runner', format(
            'no session of the login %s holds the runner lock of replay request %s: only its runner moves its items (`expiryctl replay run %s`)',
            session_user, request, request));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_lease(request bigint) FROM PUBLIC;
