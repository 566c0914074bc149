-- replay_items_send clears items of a running request (ordinals lo..hi),
-- each marked publishing, for one publish more: it counts the send in
-- sends, committed before the runner publishes, so that sends is a true
-- upper bound on the copies of an item that reached the broker, however a
-- run ends. A runner clears only what it is about to publish, a fraction of
-- a second ahead, and publishes each item at most once a run; the items it
-- marked ahead of that are not counted, since a run that dies leaves them
-- unsent. An item cleared replay_publish_bound() times already is refused
-- (rule publish-bound), and nothing is counted, unless its letter is a job
-- store's (its system retries in place, queue_systems.retries_in_place): a
-- send there retries the job only while the store holds the failure
-- captured, and finds an earlier send of the item by the marks it wrote on
-- the job, so sending it again makes no copy and the bound would only
-- leave a retried job's item failed. So is an item cleared before its time
-- (replay_item_not_before, rule not-before): with delayed, the runner's
-- word that each message carries the rest of its wait as SQS's delivery
-- delay, an item of an SQS letter bound for a standard queue may be
-- cleared up to 900 seconds (SQS's longest delay) before it, and no
-- earlier. A FIFO queue (.fifo) delays no single message, so for its items
-- the word cannot be true and is not taken. That rule is SQS's own, and
-- names it: no other system takes a delay from its runner's word.
-- Each item is judged by its own letter and target, not the request's
-- targets, which list only the first twenty. The database cannot see the
-- delay; it bounds how early the runner may say so. Returns the
-- request's status; when it is not running, nothing was counted.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[],
    delayed boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    st text;
    bound smallint := expiryctl.replay_publish_bound();
    moved integer;
    spent bigint;
    early record;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- FOR SHARE, as replay_items_mark takes it: a cancel waits for this
    -- commit, and no item is cleared after the cancel has committed.
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(items) = 0 THEN
        RETURN st;
    END IF;
    SELECT i.dead_letter_id AS id, t.not_before INTO early
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
      JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
     CROSS JOIN LATERAL (SELECT expiryctl.replay_item_not_before(r.not_before, r.include_not_due, i.retry_after, d.due_at) AS not_before) t
     CROSS JOIN LATERAL expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                   r.to_exchange, r.to_routing_key, r.via_exchange) g
     WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
       AND t.not_before > now() + CASE WHEN delayed AND d.source_system = 'sqs' AND g.rk NOT LIKE '%.fifo'
                                       THEN interval '900 seconds' ELSE interval '0' END
     ORDER BY i.ordinal LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('not-before', format(
            'item %s of replay request %s may not be published before %s (the request''s --not-before, its letter''s Retry-After or its hold''s deadline): it was not cleared',
            early.id, request, to_char(early.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
    END IF;
    -- A job store's item sent again keeps its count at the bound, which
    -- the table's replay_items_publish_bound holds every item to.
    UPDATE expiryctl.replay_items i SET sends = least(i.sends + 1, bound)
     WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
       AND i.state = 'publishing'
       AND (i.sends < bound OR EXISTS (SELECT 1 FROM expiryctl.dead_letters d JOIN expiryctl.queue_systems q ON q.name = d.source_system
                                        WHERE d.id = i.dead_letter_id AND q.retries_in_place));
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved <> cardinality(items) THEN
        SELECT i.dead_letter_id INTO spent FROM expiryctl.replay_items i
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
           AND i.state = 'publishing' AND i.sends >= bound
         ORDER BY i.ordinal LIMIT 1;
        IF FOUND THEN
            PERFORM expiryctl.replay_refuse('publish-bound', format(
                'item %s of replay request %s was sent to the broker %s times already without a recorded answer, the most one request may: it is not published again; make a new request with `expiryctl replay request` to send its letter',
                spent, request, bound));
        END IF;
        RAISE EXCEPTION 'cleared % of % items of replay request % for publishing: the items changed under the runner (each must be marked publishing)', moved, cardinality(items), request;
    END IF;
    RETURN st;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean) TO expiryctl_operator;
