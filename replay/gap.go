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

// GapTimeout bounds the gap query on the reservation database (its
// statement_timeout): a slow reservation database must not hang a summary
// or a scrape.
const GapTimeout = 5 * time.Second

// GapDeadline bounds a read of the gap from this side: a statement timeout
// is the server's to enforce, and a server or network that stopped
// answering (a connection the pool kept, then a partition) never says it
// fired. It is GapTimeout and a margin, so that when the server can still
// speak its clearer error comes first. A caller that also connects to the
// reservation database bounds the connect and the read together with it.
const GapDeadline = GapTimeout + 2*time.Second

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

// Unaccounted are the holds past their deadline beyond stillHeld, the
// archive's overdue letters whose holds may still be held
// (deadletter.Overdue.StillHeld): holds that no captured letter can speak
// for. A validation letter's hold is still held and spoken for; a conflict
// or not-found letter's moved on, so it speaks for none. The two
// databases cannot be joined, so it is a difference of counts: a letter
// whose hold expired since by other means hides one unaccounted hold.
func (g HoldsGap) Unaccounted(stillHeld int64) int64 { return max(g.PastDeadline-stillHeld, 0) }

// ErrNoGapQuery means the policy sets no gap query.
var ErrNoGapQuery = errors.New("the policy sets no gap_query, so the holds past their deadline in the reservation database are not read: " +
	"an admin enables it with `expiryctl policy set --template reservations` (or gap_query=SQL), approved by a second admin")

// GapQueryError is the gap query failing: bad SQL, a login it refuses, a
// reservation database too slow to answer within GapTimeout, or one that
// did not answer at all within GapDeadline.
type GapQueryError struct {
	Err error
	// OwnDatabase says the query ran against expiryctl's own database, no
	// reservation database having been given.
	OwnDatabase bool
}

func (e *GapQueryError) Error() string {
	if e.OwnDatabase {
		return fmt.Sprintf("the policy's gap query failed against expiryctl's own database: %v", e.Err)
	}
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
	own := reservations == nil
	if own {
		reservations = db
	}
	bounded, cancel := context.WithTimeout(ctx, GapDeadline)
	defer cancel()
	var g HoldsGap
	err = inReadOnlyTx(bounded, reservations, func(t tables) error {
		past, oldest, at, found, err := t.GapRow(bounded, pol.GapQuery)
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
		if bounded.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			// pgx says only "context deadline exceeded": on-call needs to
			// know it was the reservation database that went quiet.
			err = fmt.Errorf("the reservation database did not answer within %s (a stalled server or network): %w", GapDeadline, err)
		}
		return HoldsGap{}, &GapQueryError{Err: err, OwnDatabase: own}
	}
	return g, nil
}
