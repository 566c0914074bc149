package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Outcome is what a successfully handled job did.
type Outcome string

// The outcomes of ExpireOnce. All three are successes: the delivery is acked.
const (
	// Expired means the reservation moved from held to expired and its capacity
	// was released.
	Expired Outcome = "expired"
	// Skipped means the reservation was already expired or paid, so there was
	// nothing to do; the idempotency key is recorded all the same.
	Skipped Outcome = "skipped"
	// Duplicate means a job with the same idempotency key was processed before.
	Duplicate Outcome = "duplicate"
)

// NotDueError is a job that came before its reservation's deadline: the
// hold is still held at the job's version, and its hold_until is Wait away
// by the reservation database's clock. Nothing was recorded; the worker
// puts the job back to come again then. It is not a failure and spends no
// attempt.
type NotDueError struct {
	ReservationID string
	Wait          time.Duration
}

func (e *NotDueError) Error() string {
	return fmt.Sprintf("reservation %q is held until %s from now: not due yet", e.ReservationID, e.Wait.Round(time.Millisecond))
}

// ExpireFunc processes one decoded job. Run calls ExpireOnce through it, and
// a test or the demo substitutes one that fails the way a sick database does.
type ExpireFunc func(ctx context.Context, job Job) (Outcome, error)

// ExpireOnce applies job in one transaction: it records the idempotency key
// and, when the reservation is still held at the expected version and its
// deadline has passed by the database's clock, expires it, bumps its
// version and releases its capacity. A held reservation whose deadline is
// still ahead returns a *NotDueError and records nothing: an expiry job
// delivered early (a replay, a skewed producer clock) must not end a hold
// the customer still has.
//
// Redelivery of the same key returns Duplicate and changes nothing; a
// concurrent duplicate waits on the key's row and then does the same. A
// reservation already expired or paid returns Skipped. A missing reservation
// and a held one at another version return permanent *JobErrors
// (ClassNotFound, ClassVersionConflict) and record nothing, so the key stays
// usable should the job be replayed once the data is fixed. Database failures
// return transient *JobErrors.
func ExpireOnce(ctx context.Context, pool *pgxpool.Pool, job Job) (Outcome, error) {
	var outcome Outcome
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		outcome, err = expireInTx(ctx, tx, job)
		return err
	})
	var notDue *NotDueError
	if errors.As(err, &notDue) {
		return "", notDue
	}
	if err != nil {
		return "", classify(err)
	}
	return outcome, nil
}

func expireInTx(ctx context.Context, tx pgx.Tx, job Job) (Outcome, error) {
	// The key goes in first: its unique index is what serialises two
	// deliveries of the same job, before either reads the reservation.
	tag, err := tx.Exec(ctx, `INSERT INTO reservations.processed_jobs (idempotency_key, reservation_id, outcome)
		VALUES ($1, $2, 'expired') ON CONFLICT (idempotency_key) DO NOTHING`,
		job.IdempotencyKey, job.ReservationID)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() == 0 {
		return Duplicate, nil
	}

	var status string
	var version int64
	var units int32
	var wait time.Duration
	err = tx.QueryRow(ctx, `SELECT status, version, units, greatest(hold_until - now(), interval '0') FROM reservations.reservations
		WHERE id = $1 FOR UPDATE`, job.ReservationID).Scan(&status, &version, &units, &wait)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", permanent(ClassNotFound, "reservation %q does not exist", job.ReservationID)
	}
	if err != nil {
		return "", err
	}

	switch {
	case status != "held":
		_, err := tx.Exec(ctx, `UPDATE reservations.processed_jobs SET outcome = 'skipped'
			WHERE idempotency_key = $1`, job.IdempotencyKey)
		return Skipped, err
	case version != job.ExpectedVersion:
		return "", permanent(ClassVersionConflict,
			"reservation %q is held at version %d, the job expected version %d: the hold changed after the job was issued",
			job.ReservationID, version, job.ExpectedVersion)
	case wait > 0:
		return "", &NotDueError{ReservationID: job.ReservationID, Wait: wait}
	}

	if _, err := tx.Exec(ctx, `UPDATE reservations.reservations SET status = 'expired', version = version + 1,
		expired_at = now() WHERE id = $1`, job.ReservationID); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO reservations.capacity_releases (reservation_id, idempotency_key, units)
		VALUES ($1, $2, $3)`, job.ReservationID, job.IdempotencyKey, units); err != nil {
		return "", err
	}
	return Expired, nil
}
