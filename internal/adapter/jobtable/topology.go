package jobtable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Topology reads what m's table holds now, by the states of work `dlq
// summary --work-queue` shows beside the archive, in one read-only
// transaction on a read-only session:
//
//   - the work queue (the table's name): rows in the replay state whose
//     due time has come are ready, HeadAge the wait of the oldest of them
//     since its due time;
//   - "NAME (due later)", in the retry role: rows in the replay state not
//     yet due are scheduled;
//   - "NAME (STATES)", in the dead-letter role: rows in the failed states
//     are isolated, HeadAge the age of the oldest since it failed when the
//     mapping names a failed_at column (nil otherwise). They stay there
//     once captured, until someone puts them back or deletes them.
//
// A mapping names no running state, no workers and no rates, so nothing is
// in flight and those stay unknown (0 and nil). The login needs no more
// than GrantSQL's SELECT: it reads the status, due time and failed_at
// columns, and is checked for every mapped column as a capture's is.
//
// A database that cannot be reached, or a login short of a grant, is not
// an error: the report's Unavailable says what is missing. A table that
// is not there, or does not fit m, is: the *MappingError, its text in the
// report's Unavailable too, for a caller that shows rather than maps it.
// The error is ctx's when the caller gave up.
func Topology(ctx context.Context, ref Ref, m Mapping) (deadletter.QueueReport, error) {
	pool, tab, name, err := openPoolChecked(ctx, ref, m, 1, false)
	if err != nil {
		var mapping *MappingError
		if errors.As(err, &mapping) {
			return deadletter.QueueReport{Unavailable: err.Error()}, err
		}
		return deadletter.QueueReport{Unavailable: err.Error()}, ctx.Err()
	}
	defer pool.Close()
	unavailable := func(err error) (deadletter.QueueReport, error) {
		return deadletter.QueueReport{Unavailable: fmt.Sprintf("the jobs table %s: %v", name, err)}, ctx.Err()
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return unavailable(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	var (
		ready, scheduled, isolated int64
		readyAge, isolatedAge      *float64
	)
	states := append([]string{m.ReplayState}, m.FailedStates...)
	if err := tx.QueryRow(ctx, tab.topology(), m.ReplayState, states).
		Scan(&ready, &readyAge, &scheduled, &isolated, &isolatedAge); err != nil {
		return unavailable(err)
	}
	failed := slices.Clone(m.FailedStates)
	slices.Sort(failed)
	return deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: name, Role: deadletter.RoleWork, Ready: ready, HeadAge: age(readyAge)},
		{Name: name + " (due later)", Role: deadletter.RoleRetry, Ready: scheduled},
		{Name: name + " (" + strings.Join(failed, ", ") + ")", Role: deadletter.RoleDeadLetter, Ready: isolated, HeadAge: age(isolatedAge)},
	}}, nil
}

// age is seconds as a duration, nil when there were none; never
// negative, whatever the clock that stamped the row said.
func age(seconds *float64) *time.Duration {
	if seconds == nil {
		return nil
	}
	d := max(time.Duration(*seconds*float64(time.Second)), 0)
	return &d
}
