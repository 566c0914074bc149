-- +goose Up
-- A purge redacted its batches by scanning dead_letters in id order from the
-- first id every time, past every letter an earlier batch had redacted: on
-- an archive of 10 million letters, purging the million past retention
-- slowed from 1,500 to 600 letters a second and would have taken about half
-- an hour (make bench ARCHIVE=10m, issue 17). Each batch now starts after
-- the last id the one before it redacted, so the whole purge reads each
-- letter once. Binaries older than this schema refuse to run on it, so the
-- three-argument form goes.
-- +goose StatementBegin
DROP FUNCTION expiryctl.purge_letters(text, timestamptz, integer);
CREATE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamptz, batch integer, after bigint)
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
            'the policy keeps letters for %s: a purge may redact only letters dead-lettered before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    FOR rid IN SELECT DISTINCT i.request_id FROM expiryctl.replay_items i
                 JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                WHERE i.open AND d.id > after AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL
                ORDER BY 1 LOOP
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided: dlq purge redacted letters past retention that it held'
         WHERE id = rid AND status IN ('pending', 'approved', 'running', 'halted');
        IF FOUND THEN
            PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || rid, jsonb_build_object(
                'why', 'voided by dlq purge: letters it held passed the retention window', 'cutoff', cutoff));
        END IF;
    END LOOP;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now()
         WHERE id IN (SELECT id FROM expiryctl.dead_letters
                       WHERE id > after AND dead_lettered_at < cutoff AND redacted_at IS NULL AND status <> 'in_request'
                       ORDER BY id LIMIT greatest(batch, 1) FOR UPDATE SKIP LOCKED)
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM redacted;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION expiryctl.purge_letters(text, timestamptz, integer, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.purge_letters(text, timestamptz, integer, bigint) TO expiryctl_operator, expiryctl_admin;

-- +goose Down
-- +goose StatementBegin
DROP FUNCTION expiryctl.purge_letters(text, timestamptz, integer, bigint);
CREATE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer) RETURNS SETOF bigint
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
            'the policy keeps letters for %s: a purge may redact only letters dead-lettered before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    FOR rid IN SELECT DISTINCT i.request_id FROM expiryctl.replay_items i
                 JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                WHERE i.open AND d.dead_lettered_at < cutoff AND d.redacted_at IS NULL
                ORDER BY 1 LOOP
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided: dlq purge redacted letters past retention that it held'
         WHERE id = rid AND status IN ('pending', 'approved', 'running', 'halted');
        IF FOUND THEN
            PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || rid, jsonb_build_object(
                'why', 'voided by dlq purge: letters it held passed the retention window', 'cutoff', cutoff));
        END IF;
    END LOOP;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now()
         WHERE id IN (SELECT id FROM expiryctl.dead_letters
                       WHERE dead_lettered_at < cutoff AND redacted_at IS NULL AND status <> 'in_request'
                       ORDER BY id LIMIT greatest(batch, 1) FOR UPDATE SKIP LOCKED)
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM redacted;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION expiryctl.purge_letters(text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.purge_letters(text, timestamptz, integer) TO expiryctl_operator, expiryctl_admin;
