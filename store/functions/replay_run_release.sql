-- replay_run_release gives back the runner lease the calling session
-- holds (replay_run_acquire); a lease held by another session is left
-- alone. A lease whose session ended is free without it.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_release(request bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM expiryctl.replay_runner_leases WHERE request_id = request AND pid = pg_backend_pid()
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_release(request bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_release(request bigint) TO expiryctl_operator;
