package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// eligibilityTimeout bounds one run of the policy's eligibility query, so
// that a slow query cannot stall a run with its items marked publishing.
const eligibilityTimeout = "5s"

// eligibility runs the policy's eligibility query (Policy.EligibilityQuery)
// for the items of a run. An empty query makes every item eligible.
type eligibility struct {
	query string
	// sql is the query as it runs (eligibilitySQL).
	sql string
}

func newEligibility(query string) eligibility {
	q := policyQuery(query)
	return eligibility{query: q, sql: eligibilitySQL(q)}
}

// policyQuery is a query of the policy (eligibility, outcome) as it is
// wrapped in a subquery: without the spaces and semicolons around it.
func policyQuery(query string) string {
	q := strings.TrimSpace(query)
	for strings.HasSuffix(q, ";") {
		q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	}
	return q
}

func (e eligibility) enabled() bool { return e.query != "" }

// EligibilityError is the policy's eligibility query failing (bad SQL, a
// missing table, a timeout), as opposed to answering "not eligible". The run
// halts: a policy that cannot be evaluated cannot allow a replay.
type EligibilityError struct {
	DeadLetterID int64
	Err          error
}

func (e *EligibilityError) Error() string {
	return fmt.Sprintf("the policy's eligibility query failed for dead letter %d: %v", e.DeadLetterID, e.Err)
}

func (e *EligibilityError) Unwrap() error { return e.Err }

// checkAll decides eligibility for items in one READ ONLY transaction, each
// item by its own statement (so each sees the data as of its own start).
// It returns the reason for every ineligible item, keyed by dead letter id.
// An error from the query itself is an *EligibilityError; other errors (a
// lost connection) come back as they are.
func (e eligibility) checkAll(ctx context.Context, pool *pgxpool.Pool, items []*runItem) (map[int64]string, error) {
	out := map[int64]string{}
	if !e.enabled() || len(items) == 0 {
		return out, nil
	}
	err := inReadOnlyTx(ctx, pool, func(t tables) error {
		if err := t.EligibilityLimit(ctx); err != nil {
			return err
		}
		for _, it := range items {
			eligible, reason, found, err := e.one(ctx, t, it)
			switch {
			case isStatementError(err):
				return &EligibilityError{DeadLetterID: it.id, Err: err}
			case err != nil:
				return err
			case !found:
				out[it.id] = "not eligible: the eligibility query returned no row"
			case !eligible:
				if reason == "" {
					reason = "no reason given"
				}
				out[it.id] = "not eligible: " + reason
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// one runs the query for one item and reads its first row, whatever its
// column types turned out to be.
func (e eligibility) one(ctx context.Context, t tables, it *runItem) (eligible bool, reason string, found bool, err error) {
	values, found, err := t.EligibilityRow(ctx, e.sql, it)
	if err != nil || !found {
		return false, "", false, err
	}
	if len(values) == 0 {
		return false, "", false, &EligibilityError{DeadLetterID: it.id, Err: errors.New("it returned no columns; it must return (eligible boolean, reason text)")}
	}
	switch v := values[0].(type) {
	case bool:
		eligible = v
	case nil:
		eligible = false
	default:
		return false, "", false, &EligibilityError{DeadLetterID: it.id,
			Err: fmt.Errorf("its first column is %T, not boolean; it must return (eligible boolean, reason text)", v)}
	}
	if len(values) > 1 && values[1] != nil {
		reason = fmt.Sprint(values[1])
	}
	return eligible, reason, true, nil
}
