package demo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// The failures the simulated database produces, worded as pgx reports the
// real ones, and marked so nobody mistakes them for a real outage later.
var (
	errOutage = errors.New("failed to connect to `host=db-primary.internal user=reservations database=reservations`: " +
		"dial tcp 10.20.0.5:5432: i/o timeout (simulated by expiryctl demo)")
	errDeadlock = errors.New("ERROR: deadlock detected (SQLSTATE 40P01) (simulated by expiryctl demo)")
)

// database stands between the worker and PostgreSQL and fails on cue: every
// call while down, and the first call for each flaky reservation.
type database struct {
	pool    *pgxpool.Pool
	flaky   map[string]bool
	blipped sync.Map
	down    atomic.Bool
}

func (d *database) expire(ctx context.Context, job worker.Job) (worker.Outcome, error) {
	if d.down.Load() {
		return "", &worker.JobError{Class: worker.ClassDBTimeout, Err: errOutage}
	}
	if d.flaky[job.ReservationID] {
		if _, already := d.blipped.LoadOrStore(job.ReservationID, true); !already {
			return "", &worker.JobError{Class: worker.ClassDeadlock, Err: errDeadlock}
		}
	}
	return worker.ExpireOnce(ctx, d.pool, job)
}
