package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// RiverDeps is what RunRiver works with.
type RiverDeps struct {
	// River reaches River's database: a database of its own, never the
	// archive's. RunRiver runs River's migrations there.
	River *pgxpool.Pool
	// Queue is River's queue name.
	Queue string
	// RunID is in every reservation id of the run.
	RunID string
	// Pool holds the reservations schema: the jobs' reservations are
	// seeded there, held and past their deadline, for a worker to expire
	// once they are replayed.
	Pool *pgxpool.Pool
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// RiverResult is what RunRiver staged.
type RiverResult struct {
	// Jobs are the ids of the jobs River discarded, in river_job.
	Jobs []int64
	// Attempts is how many times River ran each before giving up.
	Attempts int
}

// riverJobs is how many expiry jobs the River incident stages.
const riverJobs = 4

// riverAttempts is each job's max_attempts: small, so that River gives
// up within a second.
const riverAttempts = 2

// riverLive are the states of a job River still means to work.
var riverLive = []string{"available", "pending", "retryable", "running", "scheduled"}

// RunRiver stages an incident on River beside the RabbitMQ one: expiry
// jobs whose reservations are due, inserted into Queue, and a River client
// whose worker fails each with a deadlock until River discards it. It
// returns once they are all discarded and the client has stopped.
//
// It refuses a queue that still holds jobs River means to work: the
// demo's client would take them for this run's and fail them.
func RunRiver(ctx context.Context, deps RiverDeps) (RiverResult, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	out := &progress{w: deps.Out}
	if out.w == nil {
		out.w = io.Discard
	}
	if deps.River == nil || deps.Pool == nil {
		return RiverResult{}, errors.New("demo: River's database and the reservations' are both required")
	}
	if err := worker.ValidRiverQueue(deps.Queue); err != nil {
		return RiverResult{}, fmt.Errorf("demo: %w", err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(deps.River), nil)
	if err != nil {
		return RiverResult{}, fmt.Errorf("demo: River's migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return RiverResult{}, fmt.Errorf("demo: River's migrations: %w", err)
	}
	var live int
	if err := deps.River.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state::text = ANY($2)`,
		deps.Queue, riverLive).Scan(&live); err != nil {
		return RiverResult{}, fmt.Errorf("demo: read River queue %s: %w", deps.Queue, err)
	}
	if live > 0 {
		return RiverResult{}, fmt.Errorf("demo: River queue %s holds %d jobs River still means to work, and the demo needs it idle: "+
			"run `expiryctl worker --river-queue river://…/%s` until they are done, or stage the demo on a queue of its own", deps.Queue, live, deps.Queue)
	}

	var seeds []seed
	params := make([]river.InsertManyParams, 0, riverJobs)
	for i := range riverJobs {
		id := riverReservation(deps.RunID, i)
		due := time.Now().Add(-time.Minute)
		seeds = append(seeds, seed{id: id, status: "held", version: 4, holdUntil: due, units: 1})
		params = append(params, river.InsertManyParams{Args: worker.RiverArgs{Body: []byte(contractJob(id, 4, due))},
			InsertOpts: &river.InsertOpts{Queue: deps.Queue, MaxAttempts: riverAttempts}})
	}
	if err := worker.EnsureSchema(ctx, deps.Pool); err != nil {
		return RiverResult{}, fmt.Errorf("demo: %w", err)
	}
	if err := seedReservations(ctx, deps.Pool, seeds); err != nil {
		return RiverResult{}, err
	}

	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &deadlockedWorker{}); err != nil {
		return RiverResult{}, fmt.Errorf("demo: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(deps.River), &river.Config{
		Queues:            map[string]river.QueueConfig{deps.Queue: {MaxWorkers: riverJobs}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		RetryPolicy:       retrySoon{},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return RiverResult{}, fmt.Errorf("demo: a River client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return RiverResult{}, fmt.Errorf("demo: start the River client: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		s, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		return client.Stop(s)
	}
	defer stop() //nolint:errcheck // only reached on an earlier error, which is the one to report

	inserted, err := client.InsertMany(ctx, params)
	if err != nil {
		return RiverResult{}, fmt.Errorf("demo: insert into River queue %s: %w", deps.Queue, err)
	}
	res := RiverResult{Attempts: riverAttempts}
	for _, r := range inserted {
		res.Jobs = append(res.Jobs, r.Job.ID)
	}
	out.printf("River queue %s: %d expiry jobs r-%s-river-*, each allowed %d attempts, and a worker whose database deadlocks",
		deps.Queue, len(res.Jobs), deps.RunID, riverAttempts)
	if err := waitFor(ctx, "River to discard the jobs", func() (bool, error) {
		var n int
		err := deps.River.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE id = ANY($1) AND state = 'discarded'`, res.Jobs).Scan(&n)
		return n == len(res.Jobs), err
	}); err != nil {
		return res, err
	}
	if err := stop(); err != nil {
		return res, fmt.Errorf("demo: stop the River client: %w", err)
	}
	out.printf("staged on River: River discarded %d jobs after %d attempts each (deadlock detected)", len(res.Jobs), riverAttempts)
	return res, nil
}

// deadlockedWorker is the River worker during the incident: the
// reservations database deadlocks on every job.
type deadlockedWorker struct {
	river.WorkerDefaults[worker.RiverArgs]
}

func (deadlockedWorker) Work(context.Context, *river.Job[worker.RiverArgs]) error {
	return errDeadlock
}

// retrySoon retries a failed job at once, so that River spends the
// attempts in milliseconds rather than in its seconds-long backoff.
type retrySoon struct{}

func (retrySoon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(10 * time.Millisecond) }

// riverReservation is the reservation id of the run's River job i.
func riverReservation(runID string, i int) string {
	return fmt.Sprintf("r-%s-river-%d", runID, i)
}

// contractJob is the contract's expiry job for reservation id, held at
// version until due.
func contractJob(id string, version int64, due time.Time) string {
	return fmt.Sprintf(`{"reservation_id":%q,"expected_version":%d,"hold_until":%q,"idempotency_key":"expire:%s:v%d"}`,
		id, version, due.UTC().Format(time.RFC3339), id, version)
}

// EnsureRiverDatabase is EnsureDatabase for River's database.
func EnsureRiverDatabase(ctx context.Context, pool *pgxpool.Pool, name string) error {
	return EnsureDatabase(ctx, pool, name, "River's database")
}

// EnsureDatabase makes sure database name (what, in messages: "River's
// database") exists on pool's server, creating it as pool's login when it
// is missing. A login without CREATEDB (a governed deployment's owner has
// none) is told who can.
func EnsureDatabase(ctx context.Context, pool *pgxpool.Pool, name, what string) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("demo: look for %s %s: %w", what, name, err)
	}
	if exists {
		return nil
	}
	_, err := pool.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	// 42P04: another demo created it meanwhile; 42501: no CREATEDB.
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P04":
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		user := pool.Config().ConnConfig.User
		return fmt.Errorf("demo: %s %s does not exist and %s may not create it: ask a DBA to run "+
			"`CREATE DATABASE %s OWNER %s` (scripts/services.sh does, for make demo)", what, name, user, name, user)
	case err != nil:
		return fmt.Errorf("demo: create %s %s: %w", what, name, err)
	}
	return nil
}
