package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The archive's overdue letters count only the jobs that reached a
// dead-letter queue and were captured: a job lost before the DLQ, or acked
// before its commit, leaves a hold past its deadline that no letter speaks
// for. The policy's gap query (issue 32) counts them at their source, the
// reservation database, read-only and bounded in time, so that the
// summary, the terminal UI and the metrics show them beside the archive's
// overdue letters, and the alert pages on them.

// gapTimeout bounds the gap query: a slow reservation database must not
// hang a summary or a scrape.
const gapTimeout = "5s"

// HoldsGap is what the reservation database says of its holds past their
// deadline, by its own clock.
type HoldsGap struct {
	PastDeadline int64 `json:"past_deadline"`
	// OldestDeadline is the earliest deadline among them; nil when none.
	OldestDeadline *time.Time `json:"oldest_deadline"`
	// At is the reservation database's clock when it answered.
	At time.Time `json:"at"`
}

// OldestLate is how late the oldest hold past its deadline is; zero when
// none is.
func (g HoldsGap) OldestLate() time.Duration {
	if g.OldestDeadline == nil {
		return 0
	}
	return max(g.At.Sub(*g.OldestDeadline), 0)
}

// Unaccounted are the holds past their deadline beyond overdue, the
// archive's overdue letters a retry can fix: holds that no captured letter
// can speak for. A letter of a permanent category is no held hold (it
// moved on), so it is not among them.
func (g HoldsGap) Unaccounted(overdue int64) int64 { return max(g.PastDeadline-overdue, 0) }

// ErrNoGapQuery means the policy sets no gap query.
var ErrNoGapQuery = errors.New("the policy sets no gap_query, so the holds past their deadline in the reservation database are not read: " +
	"an admin enables it with `expiryctl policy set --template reservations` (or gap_query=SQL), approved by a second admin")

// GapQueryError is the gap query failing: bad SQL, a login it refuses, a
// reservation database too slow to answer within gapTimeout.
type GapQueryError struct{ Err error }

func (e *GapQueryError) Error() string {
	return fmt.Sprintf("the policy's gap query failed against the reservation database: %v", e.Err)
}

func (e *GapQueryError) Unwrap() error { return e.Err }

// HoldsPastDeadline runs the policy of db's gap query against reservations
// (db itself when nil), in a read-only transaction. It returns
// ErrNoGapQuery when the policy sets none, and a *GapQueryError when the
// query fails.
func HoldsPastDeadline(ctx context.Context, db, reservations *pgxpool.Pool) (HoldsGap, error) {
	pol, err := onPostgres(db).PolicyGet(ctx)
	if err != nil {
		return HoldsGap{}, err
	}
	if pol.GapQuery == "" {
		return HoldsGap{}, ErrNoGapQuery
	}
	if reservations == nil {
		reservations = db
	}
	var g HoldsGap
	err = inReadOnlyTx(ctx, reservations, func(t tables) error {
		past, oldest, at, found, err := t.GapRow(ctx, pol.GapQuery)
		if err != nil {
			return err
		}
		if !found {
			return errors.New("it returned no row; it must return one (past_deadline bigint, oldest_deadline timestamptz)")
		}
		g = HoldsGap{PastDeadline: past, OldestDeadline: oldest, At: at.UTC()}
		if oldest != nil {
			utc := oldest.UTC()
			g.OldestDeadline = &utc
		}
		return nil
	})
	if err != nil {
		return HoldsGap{}, &GapQueryError{Err: err}
	}
	return g, nil
}
