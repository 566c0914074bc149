package pgboss

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

// QueueMissingError is a pg-boss queue that pg-boss does not know in the
// schema a connection reaches: no row of SCHEMA.queue names it. pg-boss
// writes that row when an application calls createQueue, and refuses to
// send a job to a queue without one, so such a queue is almost always a
// slip of the keyboard (or the wrong schema), and a capture of it would
// find nothing and end as if all were well. OpenSource, OpenRetrier,
// Retrier.CheckQueue and Topology return it.
type QueueMissingError struct {
	// Queue is the queue as it was named (queue.name).
	Queue string
	// Conn is the connection's name; Server the database it reaches,
	// HOST:PORT/DATABASE; Schema pg-boss's schema there.
	Conn, Server, Schema string
	// Known are up to five queues pg-boss does know there, the nearest to
	// Queue first (by edit distance, then by name); More is how many
	// more it knows.
	Known []string
	More  int
	// Nearest is the known queue that Queue is most likely a slip for:
	// the nearest by edit distance, when no more than half of the longer
	// of the two names differs; "" when none is that near.
	Nearest string
}

func (e *QueueMissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the pg-boss queue %q does not exist in the pg-boss database %q (%s): no row of %s.queue names it", e.Queue, e.Conn, e.Server, e.Schema)
	if e.Nearest != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", e.Nearest)
	}
	switch {
	case len(e.Known) == 0:
		fmt.Fprintf(&b, "; pg-boss knows no queue in schema %q there: check that the connection reaches the database and schema pg-boss's applications use", e.Schema)
	default:
		quoted := make([]string, len(e.Known))
		for i, q := range e.Known {
			quoted[i] = strconv.Quote(q)
		}
		fmt.Fprintf(&b, "; the queues pg-boss knows there: %s", strings.Join(quoted, ", "))
		if e.More > 0 {
			fmt.Fprintf(&b, " and %d more", e.More)
		}
	}
	return b.String()
}

// Is makes the error deadletter.ErrQueueNotFound, which a command exits 3
// on, on every queue system alike.
func (e *QueueMissingError) Is(target error) bool { return target == deadletter.ErrQueueNotFound }

// IsQueueMissing says whether err is, or wraps, a *QueueMissingError: a
// queue pg-boss does not know, for a caller that maps it to an exit code.
func IsQueueMissing(err error) bool {
	var missing *QueueMissingError
	return errors.As(err, &missing)
}

// knownShown is how many known queues a QueueMissingError lists.
const knownShown = 5

// maxKnownQueues bounds the queue names read to find the nearest: a
// pg-boss schema has a few dozen queues, not thousands.
const maxKnownQueues = 10000

// checkQueue says, in a read-only transaction on pool, whether pg-boss
// knows ref's queue: nil when it does, a *QueueMissingError when it does
// not.
func checkQueue(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	missing, err := queueMissing(ctx, tx, ref)
	if err != nil {
		return fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	if missing != nil {
		return missing
	}
	return nil
}

// queueMissing is the *QueueMissingError of ref's queue when pg-boss does
// not know it, nil when it does.
func queueMissing(ctx context.Context, tx pgx.Tx, ref Ref) (*QueueMissingError, error) {
	var exists bool
	if err := tx.QueryRow(ctx, ref.sql(queueRowSQL), ref.Queue).Scan(&exists); err != nil || exists {
		return nil, err
	}
	rows, err := tx.Query(ctx, ref.sql(queueNamesSQL), maxKnownQueues)
	if err != nil {
		return nil, err
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	e := &QueueMissingError{Queue: ref.Queue, Conn: ref.Conn, Server: ref.Server(), Schema: ref.Schema}
	e.Known, e.Nearest = config.Nearest(ref.Queue, known)
	if len(e.Known) > knownShown {
		e.More = len(e.Known) - knownShown
		e.Known = e.Known[:knownShown]
	}
	return e, nil
}

// CheckQueue says whether pg-boss knows the queue name names
// (pgboss://CONNECTION/QUEUE, on this retrier's connection): nil when it
// does, a *QueueMissingError when no queue row names it. A run checks each
// target queue with it before the first retry, as OpenRetrier checks the
// queue of its reference.
func (r *Retrier) CheckQueue(ctx context.Context, name string) error {
	target, err := r.target(name)
	if err != nil {
		return err
	}
	return checkQueue(ctx, r.pool, target)
}
