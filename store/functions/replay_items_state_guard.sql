-- replay_items_state_guard is the statement trigger of the same name.
-- Items move (publishing, confirmed, failed, skipped) only while their
-- request runs. A run's statements touch the items of one running request:
-- asking first whether any request in the statement is not running settles
-- them with one look-up, and only otherwise are old and new rows matched to
-- find an item that moved.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM expiryctl.replay_requests r
                   WHERE r.id IN (SELECT DISTINCT n.request_id FROM new_rows n) AND r.status <> 'running') THEN
        RETURN NULL;
    END IF;
    SELECT n.request_id, r.status INTO bad
    FROM new_rows n
    JOIN old_rows o ON o.request_id = n.request_id AND o.dead_letter_id = n.dead_letter_id
    JOIN expiryctl.replay_requests r ON r.id = n.request_id
    WHERE n.state <> o.state AND n.state IN ('publishing', 'confirmed', 'failed', 'skipped')
      AND r.status <> 'running'
    LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: items move only while it runs', bad.request_id, bad.status));
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_state_guard() FROM PUBLIC;
