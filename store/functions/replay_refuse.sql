-- replay_refuse raises a governance refusal: SQLSTATE EG001 with the rule
-- in the detail, which expiryctl (or any client) reads back as the rule
-- that refused (store.AsRefusal) and docs/governance.md lists.
CREATE OR REPLACE FUNCTION expiryctl.replay_refuse(rule text, message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- SQLSTATE EG001 marks a governance refusal; the detail names the rule so
    -- that expiryctl (or any client) can say which rule refused.
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_refuse(rule text, message text) FROM PUBLIC;
