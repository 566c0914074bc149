-- replay_publish_bound is how many runs may publish an item of a request:
-- each is cleared first (replay_items_send), so its letter reaches the
-- broker at most this many times under the request, and an item whose runs
-- used them all without a recorded broker answer fails (replay_run_start).
-- Three lets a run die twice with the item in doubt and the third still
-- send it. Migration 00026's constraint replay_items_publish_bound holds
-- the same number: raising it takes a migration.
CREATE OR REPLACE FUNCTION expiryctl.replay_publish_bound() RETURNS smallint
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT 3::smallint
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_publish_bound() FROM PUBLIC;
