-- replay_target_of is where a replay publishes a letter, as the runner
-- decides it (replay's runItem.target): its original exchange and routing
-- key, else the queue it died in by the default exchange, else the
-- request's target. rk is NULL when there is none.
CREATE OR REPLACE FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text,
    to_exchange text, to_routing_key text, OUT e text, OUT rk text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN original_exchange IS NOT NULL OR original_routing_key IS NOT NULL THEN coalesce(original_exchange, '')
                WHEN coalesce(origin_queue, '') <> '' THEN ''
                WHEN coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' THEN coalesce(to_exchange, '') END,
           CASE WHEN original_exchange IS NOT NULL OR original_routing_key IS NOT NULL THEN coalesce(original_routing_key, '')
                WHEN coalesce(origin_queue, '') <> '' THEN origin_queue
                WHEN coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' THEN coalesce(to_routing_key, '') END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, to_exchange text, to_routing_key text, OUT e text, OUT rk text) FROM PUBLIC;
