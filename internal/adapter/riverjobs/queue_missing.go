package riverjobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
)

// QueueMissingError is a River queue that River does not know in the
// database a connection reaches: no river_queue row names it and no job
// of river_job is in it, in any state. River has neither until a client
// works the queue or a job is inserted into it, so such a queue is almost
// always a slip of the keyboard, and a capture of it would find nothing
// and end as if all were well. OpenSource, OpenRetrier, Retrier.CheckQueue
// and Topology return it.
type QueueMissingError struct {
	// Queue is the queue as it was named (river_job.queue).
	Queue string
	// Conn is the connection's name; Server the database it reaches,
	// HOST:PORT/DATABASE.
	Conn, Server string
	// Known are up to five queues River does know there, the nearest to
	// Queue first (by edit distance, then by name); More is how many
	// more it knows.
	Known []string
	More  int
	// Nearest is the known queue that Queue is most likely a slip for:
	// the nearest by edit distance, when no more than half of the longer
	// of the two names differs; "" when none is that near.
	Nearest string
	// QueueTableUnread says the login may not read river_queue (a
	// capture login needs only river_job), so that only the queues
	// holding jobs were looked at: a queue that a River client works but
	// that holds no job yet looks missing to such a login.
	QueueTableUnread bool
}

func (e *QueueMissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the River queue %q does not exist in the River database %q (%s): no river_queue row and no job names it", e.Queue, e.Conn, e.Server)
	if e.Nearest != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", e.Nearest)
	}
	switch {
	case len(e.Known) == 0:
		b.WriteString("; River knows no queue there: check that the connection reaches the database River's clients use")
	default:
		quoted := make([]string, len(e.Known))
		for i, q := range e.Known {
			quoted[i] = strconv.Quote(q)
		}
		fmt.Fprintf(&b, "; the queues River knows there: %s", strings.Join(quoted, ", "))
		if e.More > 0 {
			fmt.Fprintf(&b, " and %d more", e.More)
		}
	}
	if e.QueueTableUnread {
		b.WriteString(" (this login may not read river_queue, so only queues holding jobs were looked for: " +
			"GRANT SELECT ON river_queue shows the queues River's clients work too)")
	}
	return b.String()
}

// IsQueueMissing says whether err is, or wraps, a *QueueMissingError: a
// queue River does not know, for a caller that maps it to an exit code.
func IsQueueMissing(err error) bool {
	var missing *QueueMissingError
	return errors.As(err, &missing)
}

// knownShown is how many known queues a QueueMissingError lists.
const knownShown = 5

// maxKnownQueues bounds the queue names read to find the nearest: a
// River database has a few dozen queues, not thousands.
const maxKnownQueues = 10000

// checkQueue says, in a read-only transaction on pool, whether River
// knows ref's queue: nil when it does, a *QueueMissingError when it does
// not.
func checkQueue(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	missing, err := queueMissing(ctx, tx, ref)
	if err != nil {
		return fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
	}
	if missing != nil {
		return missing
	}
	return nil
}

// queueMissing is the *QueueMissingError of ref's queue when River does
// not know it, nil when it does.
func queueMissing(ctx context.Context, tx pgx.Tx, ref Ref) (*QueueMissingError, error) {
	var hasJob, readable, hasRow bool
	if err := tx.QueryRow(ctx, queueHasJobSQL, ref.Queue).Scan(&hasJob); err != nil || hasJob {
		return nil, err
	}
	if err := tx.QueryRow(ctx, queueTableReadableSQL).Scan(&readable); err != nil {
		return nil, err
	}
	if readable {
		if err := tx.QueryRow(ctx, queueRowSQL, ref.Queue).Scan(&hasRow); err != nil || hasRow {
			return nil, err
		}
	}
	known, err := queueNames(ctx, tx, jobQueuesSQL)
	if err != nil {
		return nil, err
	}
	if readable {
		rows, err := queueNames(ctx, tx, queueRowsSQL)
		if err != nil {
			return nil, err
		}
		known = append(known, rows...)
	}
	e := &QueueMissingError{Queue: ref.Queue, Conn: ref.Conn, Server: ref.Server(), QueueTableUnread: !readable}
	e.Known, e.Nearest = config.Nearest(ref.Queue, known)
	if len(e.Known) > knownShown {
		e.More = len(e.Known) - knownShown
		e.Known = e.Known[:knownShown]
	}
	return e, nil
}

func queueNames(ctx context.Context, tx pgx.Tx, sql string) ([]string, error) {
	rows, err := tx.Query(ctx, sql, maxKnownQueues)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CheckQueue says whether River knows the queue name names
// (river://CONNECTION/QUEUE, on this retrier's connection): nil when it
// does, a *QueueMissingError when no river_queue row and no job names it.
// A run checks each target queue with it before the first retry, as
// OpenRetrier checks the queue of its reference.
func (r *Retrier) CheckQueue(ctx context.Context, name string) error {
	target, err := r.target(name)
	if err != nil {
		return err
	}
	return checkQueue(ctx, r.pool, target)
}

// Is makes the error deadletter.ErrQueueNotFound, which a command exits 3
// on, on every queue system alike.
func (e *QueueMissingError) Is(target error) bool { return target == deadletter.ErrQueueNotFound }
