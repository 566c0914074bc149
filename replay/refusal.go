package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Refusal is a governance rule saying no. Rule is the rule's short name (as
// in docs/governance.md); the message says what to do instead.
type Refusal struct {
	Rule    string
	Message string
}

func (r *Refusal) Error() string { return fmt.Sprintf("refused by rule %s: %s", r.Rule, r.Message) }

// refusalSQLState is the SQLSTATE the database raises for a governance refusal.
const refusalSQLState = "EG001"

// asRefusal turns the database's governance exception into a *Refusal and
// leaves other errors alone.
func asRefusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == refusalSQLState {
		return &Refusal{Rule: strings.TrimPrefix(pgErr.Detail, "rule: "), Message: pgErr.Message}
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "replay_items_one_open_request" {
		return &Refusal{Rule: "one-open-request", Message: "a dead letter in this cohort joined another open request meanwhile: try again"}
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.HasPrefix(pgErr.ConstraintName, "four_eyes") {
		return &Refusal{Rule: "four-eyes", Message: "the requester cannot review their own request: another approver must"}
	}
	return err
}

func refuse(rule, format string, args ...any) error {
	return &Refusal{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// DatabaseRefusal returns the *Refusal the database raised in err, or err
// unchanged when it is not a governance refusal. Tests that act as a second
// client, bypassing expiryctl's own checks, use it to name the rule.
func DatabaseRefusal(err error) error { return asRefusal(err) }
