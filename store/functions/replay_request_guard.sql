-- replay_request_guard is the trigger that holds every write to a request
-- to the rules, whoever makes it: a request is inserted pending, within the
-- policy's cohort and rate bounds; its cohort and limits never change; and
-- its status moves only pending -> approved | rejected | expired |
-- cancelled, approved -> running | expired | cancelled, running -> halted |
-- completed | cancelled, halted -> approved | rejected | cancelled. A
-- review is by another login than the requester's in every identity mode
-- (four-eyes), by one of the policy's approvers when it names any, of a
-- pending request before it expires, and an approval only while the cohort
-- is as it was frozen (replay_cohort_changes). An approval is spent by the
-- run it starts.
CREATE OR REPLACE FUNCTION expiryctl.replay_request_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    pol expiryctl.policy%ROWTYPE;
    changed record;
BEGIN
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton;

    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.reviewed_by IS NOT NULL OR NEW.approval_spent THEN
            PERFORM expiryctl.replay_refuse('new-requests-pending', 'a replay request starts pending and unreviewed');
        END IF;
        IF NEW.item_count > pol.max_cohort THEN
            PERFORM expiryctl.replay_refuse('max-cohort', format(
                'the cohort has %s letters and policy allows at most %s per request: narrow the filter or lower --max',
                NEW.item_count, pol.max_cohort));
        END IF;
        IF NEW.rate > pol.max_rate THEN
            PERFORM expiryctl.replay_refuse('max-rate', format(
                'rate %s/s is above the policy maximum of %s/s: lower --rate', NEW.rate, pol.max_rate));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.requested_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the requester must be the database role %s, not %s',
                session_user, NEW.requested_by));
        END IF;
        NEW.requested_db_role := session_user;
        NEW.created_xid := pg_current_xact_id();
        RETURN NEW;
    END IF;

    IF NEW.kind IS DISTINCT FROM OLD.kind OR NEW.filter IS DISTINCT FROM OLD.filter
       OR NEW.item_count IS DISTINCT FROM OLD.item_count OR NEW.cohort_hash IS DISTINCT FROM OLD.cohort_hash
       OR NEW.rate IS DISTINCT FROM OLD.rate OR NEW.canary IS DISTINCT FROM OLD.canary
       OR NEW.fresh_key IS DISTINCT FROM OLD.fresh_key OR NEW.to_exchange IS DISTINCT FROM OLD.to_exchange
       OR NEW.to_routing_key IS DISTINCT FROM OLD.to_routing_key OR NEW.requested_by IS DISTINCT FROM OLD.requested_by
       OR NEW.requested_db_role IS DISTINCT FROM OLD.requested_db_role OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.created_xid IS DISTINCT FROM OLD.created_xid
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.why IS DISTINCT FROM OLD.why
       OR NEW.stop_failure_ratio IS DISTINCT FROM OLD.stop_failure_ratio
       OR NEW.stop_queue_depth IS DISTINCT FROM OLD.stop_queue_depth
       OR NEW.stop_redead_ratio IS DISTINCT FROM OLD.stop_redead_ratio
       OR NEW.canary_window IS DISTINCT FROM OLD.canary_window
       OR NEW.eligibility_confirmed IS DISTINCT FROM OLD.eligibility_confirmed THEN
        PERFORM expiryctl.replay_refuse('frozen-request', format('replay request %s is frozen: its cohort and limits cannot be changed', OLD.id));
    END IF;

    IF NEW.status = OLD.status THEN
        IF NEW.reviewed_by IS DISTINCT FROM OLD.reviewed_by OR NEW.reviewed_db_role IS DISTINCT FROM OLD.reviewed_db_role
           OR NEW.reviewed_at IS DISTINCT FROM OLD.reviewed_at THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s: it was already reviewed by %s', OLD.id, OLD.status, coalesce(OLD.reviewed_by, 'nobody')));
        END IF;
        IF NEW.approval_spent IS DISTINCT FROM OLD.approval_spent OR NEW.approvals IS DISTINCT FROM OLD.approvals
           OR NEW.approval_expires_at IS DISTINCT FROM OLD.approval_expires_at
           OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.finished_at IS DISTINCT FROM OLD.finished_at THEN
            PERFORM expiryctl.replay_refuse('single-use-approval', format(
                'the approval of replay request %s changes only through a review or the start of a run', OLD.id));
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.status IN ('approved', 'rejected') THEN
        IF OLD.status NOT IN ('pending', 'halted') THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s, not pending: it was already reviewed', OLD.id, OLD.status));
        END IF;
        IF now() >= OLD.expires_at AND OLD.status = 'pending' THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'replay request %s expired at %s: ask the requester to make a new one', OLD.id, OLD.expires_at));
        END IF;
        IF session_user = OLD.requested_db_role THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                'the login %s requested replay request %s and cannot review it, whatever --actor says: another approver must',
                session_user, OLD.id));
        END IF;
        IF NEW.reviewed_by IS NULL OR NEW.reviewed_by = OLD.requested_by THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                '%s requested replay request %s and cannot review it: another approver must', OLD.requested_by, OLD.id));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.reviewed_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the reviewer must be the database role %s, not %s',
                session_user, NEW.reviewed_by));
        END IF;
        IF cardinality(pol.approvers) > 0 AND NOT (session_user = ANY (pol.approvers)) THEN
            PERFORM expiryctl.replay_refuse('approvers', format(
                'the login %s is not an approver under the policy (approvers: %s)', session_user,
                array_to_string(pol.approvers, ', ')));
        END IF;
        IF NEW.status = 'approved' THEN
            SELECT * INTO changed FROM expiryctl.replay_cohort_changes(OLD.id) LIMIT 1;
            IF FOUND THEN
                PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                    'the cohort of replay request %s changed since it was frozen (dead letter %s: %s): make a new request',
                    OLD.id, changed.dead_letter_id, changed.change));
            END IF;
            NEW.approval_spent := false;
            NEW.approvals := OLD.approvals + 1;
            NEW.approval_expires_at := now() + pol.approval_ttl;
            NEW.halt_reason := NULL;
        END IF;
        NEW.reviewed_db_role := session_user;
        NEW.reviewed_at := now();
        -- A rejection ends the request, as a cancel or a completion does.
        IF NEW.status = 'rejected' THEN
            NEW.finished_at := now();
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.status = 'running' THEN
        IF OLD.status <> 'approved' OR OLD.approval_spent THEN
            PERFORM expiryctl.replay_refuse('approved-to-run', format(
                'replay request %s is %s: only an approved request runs', OLD.id, OLD.status));
        END IF;
        IF OLD.approval_expires_at < now() THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'the approval of replay request %s expired: it must be approved again', OLD.id));
        END IF;
        NEW.approval_spent := true;
        NEW.started_at := coalesce(OLD.started_at, now());
        RETURN NEW;
    END IF;

    IF NEW.status IN ('halted', 'completed') AND OLD.status <> 'running' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: only a running request halts or completes', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'pending' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: no request goes back to pending', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'cancelled' AND OLD.status NOT IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('cancel', format('replay request %s is %s and cannot be cancelled', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'expired' AND NOT (
        (OLD.status = 'pending' AND OLD.expires_at <= now()) OR
        (OLD.status = 'approved' AND OLD.approval_expires_at <= now())) THEN
        PERFORM expiryctl.replay_refuse('expire', format('replay request %s is %s and cannot expire', OLD.id, OLD.status));
    END IF;
    IF OLD.status IN ('rejected', 'expired', 'completed', 'cancelled') THEN
        PERFORM expiryctl.replay_refuse('terminal', format('replay request %s is %s: it is over', OLD.id, OLD.status));
    END IF;
    IF NEW.status IN ('completed', 'cancelled', 'rejected', 'expired') THEN
        NEW.finished_at := now();
    END IF;
    RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_request_guard() FROM PUBLIC;
