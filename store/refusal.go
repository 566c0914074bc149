package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Refusal is a governance rule saying no. Rule is the rule's short name (as
// in docs/governance.md); the message says what to do instead. The database
// raises it (SQLSTATE EG001, the rule in the detail), so that any client,
// not only expiryctl, hears which rule refused.
type Refusal struct {
	Rule    string
	Message string
}

func (r *Refusal) Error() string { return fmt.Sprintf("refused by rule %s: %s", r.Rule, r.Message) }

// RefusalSQLState is the SQLSTATE the database raises for a governance refusal.
const RefusalSQLState = "EG001"

// NotFoundSQLState is the SQLSTATE the database's functions raise for an
// object that does not exist; the detail names it as kind:id.
const NotFoundSQLState = "EG002"

// functionRoles says which group, by its role, may call each function of
// the schema's API, for the message when PostgreSQL refuses EXECUTE to a
// login in none. The message cannot name the group itself: the error does
// not say which deployment's schema refused.
var functionRoles = map[string]string{
	"access_granted":                "auditor",
	"audit_checkpoint_record":       "auditor",
	"audit_counts_extend":           "auditor",
	"audit_tree_extend":             "auditor or admin or ingester",
	"ingest_letters":                "ingester or operator",
	"purge_letters":                 "operator or admin",
	"replay_request_create":         "operator",
	"replay_run_start":              "operator",
	"replay_items_mark":             "operator",
	"replay_items_send":             "operator",
	"replay_items_record":           "operator",
	"replay_run_interrupted":        "operator",
	"replay_run_halt":               "operator",
	"replay_run_complete":           "operator",
	"replay_discard_window":         "operator",
	"replay_run_acked_after_cancel": "operator",
	"replay_cancel":                 "operator",
	"replay_canary_record":          "operator",
	"replay_outcomes_record":        "operator",
	"replay_run_acquire":            "operator",
	"replay_run_release":            "operator",
	"replay_review":                 "approver",
	"policy_set":                    "admin",
	"policy_review":                 "admin",
	"replay_target_of":              "operator or approver or admin or auditor",
	"replay_retries_in_place":       "operator or approver or admin or auditor",
	"work_queue_of":                 "operator or approver or admin or auditor",
	"replay_item_not_before":        "operator or approver or admin or auditor",
	"replay_watched_queues":         "operator or approver or admin or auditor",
	"replay_run_watch_owed":         "operator",
}

// AsRefusal turns the database's governance exception, and PostgreSQL's own
// refusal of a privilege, into a *Refusal; other errors come back as they
// are.
func AsRefusal(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == RefusalSQLState:
		return &Refusal{Rule: strings.TrimPrefix(pgErr.Detail, "rule: "), Message: pgErr.Message}
	case pgErr.Code == "23505" && pgErr.ConstraintName == "replay_items_one_open_request":
		return &Refusal{Rule: "one-open-request", Message: "a dead letter in this cohort joined another open request meanwhile: try again"}
	case pgErr.Code == "23514" && pgErr.ConstraintName == "replay_items_publish_bound":
		// Only a bug in a function can reach the constraint
		// (replay_items_send refuses first); it is the same rule.
		return &Refusal{Rule: "publish-bound", Message: "an item of the request was sent to the broker as often as one request may: it is not published again; make a new request to send its letter"}
	case pgErr.Code == "23514" && (strings.HasPrefix(pgErr.ConstraintName, "four_eyes") || pgErr.ConstraintName == "policy_four_eyes"):
		return &Refusal{Rule: "four-eyes", Message: "the requester cannot review their own request: another approver must"}
	case pgErr.Code == "42501":
		return &Refusal{Rule: "role", Message: privilegeMessage(pgErr.Message)}
	}
	return err
}

// privilegeMessage says what a refused privilege means for an expiryctl user.
func privilegeMessage(msg string) string {
	const prefix = "permission denied for function "
	if name, ok := strings.CutPrefix(msg, prefix); ok {
		if name == "access_change" {
			return msg + ": only the schema owner manages access"
		}
		if role, known := functionRoles[name]; known {
			return fmt.Sprintf("%s: your login is not a member of this deployment's %s group (expiryctl_%s, or expiryctl_NAME_%s in a named deployment; `expiryctl access list` names them); ask the schema owner (`expiryctl access grant LOGIN %s`)",
				msg, role, firstRole(role), firstRole(role), firstRole(role))
		}
	}
	if strings.HasPrefix(msg, "must have admin option on role") {
		return msg + ": the schema's owner grants the groups with ADMIN OPTION on them, which a DBA gives it once with `expiryctl access bootstrap OWNER`"
	}
	return msg + ": no expiryctl group writes a table directly; expiryctl's commands go through the schema's functions, and `expiryctl access list` shows who is in which group"
}

// firstRole is the first of "a or b".
func firstRole(roles string) string {
	first, _, _ := strings.Cut(roles, " ")
	return first
}
