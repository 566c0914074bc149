-- purge_letters is one batch of `dlq purge`: it redacts the payloads and
-- headers of up to batch letters captured before cutoff, after the
-- letter id after, and returns their ids. The cutoff may not be inside the
-- policy's retention window (rule retention). An open request that holds
-- such a letter is voided first, since its cohort can no longer be
-- published as approved; a letter a request holds is never redacted. Each
-- batch and each voided request leaves an audit row. Retention counts from
-- the capture (ingested_at, the server's clock), never from the time a
-- letter says it died: a letter claiming 1970 is kept as long as any.
CREATE OR REPLACE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    keep interval;
    ids bigint[];
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('dlq purge', 'expiryctl_operator', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT retention INTO keep FROM expiryctl.policy WHERE singleton;
    IF cutoff > now() - keep THEN
        PERFORM expiryctl.replay_refuse('retention', format(
            'the policy keeps letters for %s: a purge may redact only letters captured before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    FOR rid IN SELECT DISTINCT i.request_id FROM expiryctl.replay_items i
                 JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                WHERE i.open AND d.id > after AND d.ingested_at < cutoff AND d.redacted_at IS NULL
                ORDER BY 1 LOOP
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided: dlq purge redacted letters past retention that it held'
         WHERE id = rid AND status IN ('pending', 'approved', 'running', 'halted');
        IF FOUND THEN
            PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || rid, jsonb_build_object(
                'why', 'voided by dlq purge: letters it held passed the retention window', 'cutoff', cutoff));
        END IF;
    END LOOP;
    -- The batch's letters are locked first, and only the letters:
    -- replay_request_create locks the letters it freezes before it moves
    -- their status, so once this statement holds a letter, any request
    -- that took it has committed, and the next statement, on a snapshot of
    -- its own, sees the letter in_request and leaves it. Locking the state
    -- rows too would write a lock into each of them, a million in a large
    -- purge.
    SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}') INTO ids
      FROM (SELECT d.id FROM expiryctl.dead_letters d
              JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id
             WHERE d.id > after AND d.ingested_at < cutoff AND d.redacted_at IS NULL AND s.status <> 'in_request'
             ORDER BY d.id LIMIT greatest(batch, 1) FOR UPDATE OF d SKIP LOCKED) c;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters d SET payload = '', headers = '{}', redacted_at = now()
         WHERE d.id = ANY (ids)
           AND NOT EXISTS (SELECT 1 FROM expiryctl.dead_letter_states s
                            WHERE s.dead_letter_id = d.id AND s.status = 'in_request')
        RETURNING d.id)
    SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}') INTO ids FROM redacted r;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;

REVOKE ALL ON FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) TO expiryctl_operator, expiryctl_admin;
