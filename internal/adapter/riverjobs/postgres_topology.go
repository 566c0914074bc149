package riverjobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Topology reads what River's queue holds now, by state, as the states of
// work `dlq summary` shows beside the archive: available jobs are ready
// and running ones in flight in the work queue; retryable and scheduled
// ones wait out a backoff (River's own retry queue); discarded and
// cancelled ones are isolated, as a dead-letter queue's. River records no
// workers and no rates, so those stay unknown. A database that cannot be
// reached is not an error: the report's Unavailable says so.
func Topology(ctx context.Context, ref Ref) (deadletter.QueueReport, error) {
	cfg, err := ref.PoolConfig()
	if err != nil {
		return deadletter.QueueReport{}, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return deadletter.QueueReport{Unavailable: fmt.Sprintf("the River database %s: %v", ref.DatabaseName(), err)}, nil
	}
	defer pool.Close()
	var available, running, waiting, isolated int64
	err = pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'available'), count(*) FILTER (WHERE state = 'running'),
		count(*) FILTER (WHERE state IN ('retryable', 'scheduled')), count(*) FILTER (WHERE state = ANY ($2::river_job_state[]))
		FROM river_job WHERE queue = $1`, ref.Queue, ref.States).Scan(&available, &running, &waiting, &isolated)
	if err != nil {
		return deadletter.QueueReport{Unavailable: fmt.Sprintf("the River database %s: %v", ref.DatabaseName(), err)}, nil
	}
	name := ref.Name()
	return deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: name, Role: deadletter.RoleWork, Ready: available, Unacked: running},
		{Name: name + " (retryable, scheduled)", Role: deadletter.RoleRetry, Ready: waiting},
		{Name: name + " (" + strings.Join(ref.States, ", ") + ")", Role: deadletter.RoleDeadLetter, Ready: isolated},
	}}, nil
}
