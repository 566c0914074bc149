-- replay_published_job says whether replay request `request` published a
-- letter of job `job` (an item of it publishing or confirmed): the only
-- case in which a captured letter's claim to come back from that request
-- (x-expiryctl-replay-request, and its replay count) is taken, since an
-- ingester's word alone could pin a letter on any request.
CREATE OR REPLACE FUNCTION expiryctl.replay_published_job(request bigint, job text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                    WHERE i.request_id = request AND d.job_key = job AND i.state IN ('publishing', 'confirmed'))
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_published_job(request bigint, job text) FROM PUBLIC;
