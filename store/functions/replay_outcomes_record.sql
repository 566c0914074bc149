-- replay_outcomes_record writes a batch of decided outcomes for a running
-- request, as its runner: the caller must be an operator whose login holds
-- the request's runner lock, and every item must be one the run confirmed.
-- A row already terminal never changes; one written "not terminal" takes
-- the terminal answer that comes later.
CREATE OR REPLACE FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamptz[],
    confirmed_ats timestamptz[], window_ends timestamptz[], terminal_ats timestamptz[], duplicates boolean[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    wanted integer;
    known integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: outcomes are recorded only by the run of a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(letters) IS DISTINCT FROM cardinality(published_ats) OR cardinality(letters) IS DISTINCT FROM cardinality(confirmed_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(window_ends) OR cardinality(letters) IS DISTINCT FROM cardinality(terminal_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(duplicates) THEN
        RAISE EXCEPTION 'replay_outcomes_record: the arrays differ in length';
    END IF;
    SELECT count(DISTINCT l) INTO wanted FROM unnest(letters) l;
    SELECT count(*) INTO known FROM expiryctl.replay_items i
     WHERE i.request_id = request AND i.dead_letter_id = ANY (letters) AND i.state = 'confirmed';
    IF known <> wanted THEN
        PERFORM expiryctl.replay_refuse('confirmed-items', format(
            '%s not %s of replay request %s: an outcome belongs to an item the run confirmed',
            expiryctl.count_word(wanted, 'the letter is', format('%s of the %s letters are', wanted - known, wanted)),
            expiryctl.count_word(wanted, 'a confirmed item', 'confirmed items'), request));
    END IF;
    INSERT INTO expiryctl.replay_outcomes AS o (request_id, dead_letter_id, approval, published_at, confirmed_at,
                                                window_ends_at, terminal_at, duplicate)
    SELECT request, u.id, req.approvals, u.published_at, u.confirmed_at, u.window_ends_at, u.terminal_at, coalesce(u.duplicate, false)
      FROM unnest(letters, published_ats, confirmed_ats, window_ends, terminal_ats, duplicates)
           AS u(id, published_at, confirmed_at, window_ends_at, terminal_at, duplicate)
    ON CONFLICT (request_id, dead_letter_id) DO UPDATE
       SET terminal_at = excluded.terminal_at, duplicate = excluded.duplicate, observed_at = now()
     WHERE o.terminal_at IS NULL AND excluded.terminal_at IS NOT NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]) TO expiryctl_operator;
