-- access_granted is the membership the trail accounts for: each login and
-- group whose latest access.grant or access.revoke row (written only by
-- access_change) is a grant. Moving a schema to its deployment's groups
-- moves these members, and `audit verify --reconcile` reports a member of
-- the deployment's groups that is not among them.
CREATE OR REPLACE FUNCTION expiryctl.access_granted() RETURNS TABLE (login text, group_name text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT latest.login, latest.group_name
      FROM (SELECT DISTINCT ON (l.details->>'login', g.name)
                   l.details->>'login' AS login, g.name AS group_name, l.action
              FROM expiryctl.audit_log l
             CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(l.details->'groups') = 'array'
                                                               THEN l.details->'groups' ELSE '[]' END) AS g(name)
             WHERE l.action IN ('access.grant', 'access.revoke') AND l.outcome = 'ok'
             ORDER BY l.details->>'login', g.name, l.seq DESC) latest
     WHERE latest.action = 'access.grant' AND latest.login IS NOT NULL
$$;

REVOKE ALL ON FUNCTION expiryctl.access_granted() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.access_granted() TO expiryctl_auditor;
