package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// WorkerOptions holds what `expiryctl worker` needs.
type WorkerOptions struct {
	IO *IOStreams
	DB func(context.Context) (*pgxpool.Pool, error)
	// AMQP dials a connection of its own with the given connection
	// properties, which advertise the worker's handler version.
	AMQP func(properties amqp.Table) (*amqp.Connection, error)

	Prefix string
	// SQSQueue, when set, consumes that SQS queue (sqs://NAME or a queue
	// URL) instead of RabbitMQ.
	SQSQueue string
	// RiverQueue, when set, works that River queue
	// (river://HOST:PORT/DATABASE/QUEUE) instead of RabbitMQ.
	RiverQueue string
	// JobTable, when set, polls that jobs table
	// (jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE, shaped as
	// docs/jobtable.md's example) instead of RabbitMQ.
	JobTable       string
	MaxAttempts    int
	Backoff        worker.Backoff
	Concurrency    int
	HandlerVersion string
}

// NewCmdWorker builds `expiryctl worker`, the reference expiry worker.
func NewCmdWorker(f *Factory, runF func(context.Context, *WorkerOptions) error) *cobra.Command {
	opts := &WorkerOptions{IO: f.IO, DB: f.RawDB, AMQP: f.DialAMQP}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the reference reservation-expiry worker",
		Long: `Run the reference worker of the message contract until interrupted.

It expires reservations exactly once per idempotency key, and only once their
hold has run out by the reservation database's clock: a job that comes early,
or before its not_before, waits in a retry queue until then, spending no
attempt. It acknowledges only after its transaction committed, retries
transient failures through TTL retry queues with capped exponential backoff
(5 s, doubling to 15 minutes, each wait shortened by up to a fifth; never
sooner than a Retry-After), and dead-letters permanent failures and exhausted
budgets (7 attempts) with the contract's headers. It is what the demo
and the end-to-end tests run; point your own worker at docs/message-contract.md.

--handler-version (or EXPIRYCTL_HANDLER_VERSION) is the version it writes as
x-handler-version on the letters it dead-letters and advertises as the
handler-version property of its AMQP connection: ` + "`replay run`" + ` refuses to
replay letters onto consumers that all run a version the letters failed under.
Starting it with a new version is how the demo "deploys" a fix.

With --sqs-queue it consumes an SQS work queue instead: it expires each job
exactly once and deletes the message only after its commit, and leaves a job
that fails to SQS, whose redrive policy moves it to the DLQ. It is the demo's
consumer of replayed SQS jobs; it sends nothing to the DLQ itself.

With --river-queue it runs a River client on that queue instead, working the
contract's jobs of kind reservation_expiry: a job completes only after its
expiry committed, one that comes early is snoozed until it is due, a permanent
failure cancels the job, and a transient one is left to River's retry policy
and the job's max_attempts, after which River discards it. It reaches River's
database as the login the queue names, else EXPIRYCTL_RIVER_USER, with
EXPIRYCTL_RIVER_PASSWORD; --max-attempts and --backoff-* do not apply. It is
the demo's worker of retried River jobs.

With --job-table it polls a team's own jobs table instead, shaped as
docs/jobtable.md's example (id, payload, status, attempt_count, last_error,
run_at, failed_at): it takes the oldest due 'pending' row with SELECT … FOR
UPDATE SKIP LOCKED, expires its reservation exactly once and marks the row
'done'; a job that comes early is made due at its deadline, a permanent failure
marks the row 'failed', and a transient one is retried after --backoff-* until
--max-attempts runs have failed (counted after each run, so a replayed row
whose attempts were kept still runs). It reaches the table's database as the
login the reference names, else EXPIRYCTL_JOBTABLE_USER, with
EXPIRYCTL_JOBTABLE_PASSWORD: the team's login, which may update those columns.
It is the demo's poller of replayed rows.`,
		Example: `  expiryctl worker
  expiryctl worker --prefix sandbox --max-attempts 3
  expiryctl worker --backoff-base 1s --backoff-cap 1m --backoff-jitter 0.5
  expiryctl worker --handler-version 2026.11.30-fix   # the fixed worker, before a replay
  AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4100 expiryctl worker --sqs-queue sqs://reservation-expiry
  EXPIRYCTL_RIVER_USER=river_worker expiryctl worker --river-queue river://127.0.0.1:5432/river/reservation-expiry
  expiryctl worker --job-table jobtable://jobs@127.0.0.1:5432/jobs/public.reservation_expiry_jobs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.MaxAttempts < 1 {
				return flagErrorf("invalid --max-attempts %d: use 1 or more", opts.MaxAttempts)
			}
			if err := opts.Backoff.Validate(); err != nil {
				return flagErrorf("invalid --backoff-base, --backoff-cap or --backoff-jitter: %v", err)
			}
			if opts.Concurrency < 1 {
				return flagErrorf("invalid --concurrency %d: use 1 or more", opts.Concurrency)
			}
			if !cmd.Flags().Changed("handler-version") {
				opts.HandlerVersion = firstNonEmpty(f.Getenv("EXPIRYCTL_HANDLER_VERSION"), opts.HandlerVersion)
			}
			if strings.TrimSpace(opts.HandlerVersion) == "" {
				return flagErrorf("invalid --handler-version: name the worker's version, e.g. --handler-version 2026.11.30-fix")
			}
			if opts.RiverQueue != "" {
				if opts.SQSQueue != "" {
					return flagErrorf("--river-queue and --sqs-queue name two systems: run a worker for each")
				}
				ref, err := riverjobs.ParseRef(opts.RiverQueue)
				if err != nil {
					return &FlagError{Err: err}
				}
				if err := worker.ValidRiverQueue(ref.Queue); err != nil {
					return flagErrorf("invalid --river-queue: %v", err)
				}
			}
			if opts.JobTable != "" {
				if opts.SQSQueue != "" || opts.RiverQueue != "" {
					return flagErrorf("--job-table and --sqs-queue or --river-queue name two systems: run a worker for each")
				}
				if _, err := jobtable.ParseRef(opts.JobTable); err != nil {
					return flagErrorf("invalid --job-table: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.JobTable != "" {
				return jobTableWorkerRun(cmd.Context(), f, opts)
			}
			if opts.RiverQueue != "" {
				return riverWorkerRun(cmd.Context(), f, opts)
			}
			if opts.SQSQueue != "" {
				return sqsWorkerRun(cmd.Context(), opts)
			}
			return workerRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "prefix for the exchange and queue names (default: the production names)")
	cmd.Flags().StringVar(&opts.SQSQueue, "sqs-queue", "", "consume this SQS work queue (sqs://NAME or its URL) instead of RabbitMQ")
	cmd.Flags().StringVar(&opts.RiverQueue, "river-queue", "", "work this River queue (river://[USER@]HOST[:PORT]/DATABASE/QUEUE) instead of RabbitMQ")
	cmd.Flags().StringVar(&opts.JobTable, "job-table", "", "poll this jobs table (jobtable://[USER@]HOST[:PORT]/DATABASE/SCHEMA.TABLE) instead of RabbitMQ")
	opts.Backoff = worker.DefaultBackoff
	cmd.Flags().IntVar(&opts.MaxAttempts, "max-attempts", 7, "attempts before a transient failure is dead-lettered")
	cmd.Flags().DurationVar(&opts.Backoff.Base, "backoff-base", worker.DefaultBackoff.Base, "the wait after the first failure; it doubles after each further one")
	cmd.Flags().DurationVar(&opts.Backoff.Max, "backoff-cap", worker.DefaultBackoff.Max, "the longest wait between attempts")
	cmd.Flags().Float64Var(&opts.Backoff.Spread, "backoff-jitter", worker.DefaultBackoff.Spread, "the largest part of each wait taken off at random, from 0 to 1")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 4, "jobs processed at once")
	cmd.Flags().StringVar(&opts.HandlerVersion, "handler-version", worker.DefaultHandlerVersion,
		"the worker's version: on its dead letters (x-handler-version) and its connection (env EXPIRYCTL_HANDLER_VERSION)")
	return cmd
}

func workerRun(ctx context.Context, opts *WorkerOptions) error {
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	conn, err := opts.AMQP(worker.ConnectionProperties(opts.HandlerVersion))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := worker.EnsureSchema(ctx, pool); err != nil {
		return err
	}
	topo := worker.NewTopology(opts.Prefix)
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := worker.DeclareTopology(ch, topo); err != nil {
		return err
	}
	_ = ch.Close()
	fmt.Fprintf(opts.IO.ErrOut, "worker %s consuming %s (dead letters go to %s); Ctrl-C stops it\n", opts.HandlerVersion, topo.Queue, topo.DeadLetterQueue)
	err = worker.Run(ctx, worker.Deps{Pool: pool, AMQP: conn, Topology: topo,
		Config: worker.Config{MaxAttempts: opts.MaxAttempts, Backoff: opts.Backoff, Concurrency: opts.Concurrency, HandlerVersion: opts.HandlerVersion}})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// sqsWorkerRun is `expiryctl worker --sqs-queue`.
func sqsWorkerRun(ctx context.Context, opts *WorkerOptions) error {
	ref, err := sqsqueue.ParseQueueRef(opts.SQSQueue)
	if err != nil {
		return &FlagError{Err: err}
	}
	pool, err := reservationsPool(ctx, opts)
	if err != nil {
		return err
	}
	client, err := sqsqueue.NewClient(ctx, ref)
	if err != nil {
		return err
	}
	queue, err := sqsqueue.FindQueue(ctx, client, ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "worker %s consuming SQS queue %s; Ctrl-C stops it\n", opts.HandlerVersion, queue.ARN)
	return worker.RunSQS(ctx, worker.SQSDeps{Pool: pool, Client: client, QueueURL: queue.URL, Out: opts.IO.ErrOut})
}

// riverWorkerRun is `expiryctl worker --river-queue`.
func riverWorkerRun(ctx context.Context, f *Factory, opts *WorkerOptions) error {
	ref, err := riverjobs.ParseRef(driver.WithLogin(f.Getenv, opts.RiverQueue, riverjobs.UserEnv))
	if err != nil {
		return &FlagError{Err: err}
	}
	pool, err := reservationsPool(ctx, opts)
	if err != nil {
		return err
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		return err
	}
	riverPool, err := answeringPool(ctx, cfg, "the River database "+ref.DatabaseName())
	if err != nil {
		return err
	}
	defer riverPool.Close()
	fmt.Fprintf(opts.IO.ErrOut, "worker %s working River queue %s; Ctrl-C stops it\n", opts.HandlerVersion, ref.Name())
	return worker.RunRiver(ctx, worker.RiverDeps{Pool: pool, River: riverPool, Queue: ref.Queue, Concurrency: opts.Concurrency, Out: opts.IO.ErrOut})
}

// jobTableWorkerRun is `expiryctl worker --job-table`.
func jobTableWorkerRun(ctx context.Context, f *Factory, opts *WorkerOptions) error {
	ref, err := jobtable.ParseRef(driver.WithLogin(f.Getenv, opts.JobTable, jobtable.UserEnv))
	if err != nil {
		return &FlagError{Err: err}
	}
	pool, err := reservationsPool(ctx, opts)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(ref.ConnString)
	if err != nil {
		return fmt.Errorf("the jobs table %s: %w", ref.Name(), err)
	}
	jobs, err := answeringPool(ctx, cfg, "the jobs table "+ref.Name())
	if err != nil {
		return err
	}
	defer jobs.Close()
	fmt.Fprintf(opts.IO.ErrOut, "worker %s polling jobs table %s; Ctrl-C stops it\n", opts.HandlerVersion, ref.Name())
	err = worker.RunJobTable(ctx, worker.JobTableDeps{Pool: pool, Jobs: jobs, Table: ref.Table, MaxAttempts: opts.MaxAttempts,
		Backoff: opts.Backoff, Concurrency: opts.Concurrency, Out: opts.IO.ErrOut})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// reservationsPool is the database whose holds the reference worker
// expires, its reservations schema made if missing.
func reservationsPool(ctx context.Context, opts *WorkerOptions) (*pgxpool.Pool, error) {
	pool, err := opts.DB(ctx)
	if err != nil {
		return nil, err
	}
	if err := worker.EnsureSchema(ctx, pool); err != nil {
		return nil, err
	}
	return pool, nil
}

// answeringPool connects to a job store's database and checks that it
// answers, so that a wrong address fails before the worker says it works;
// what names the database in errors.
func answeringPool(ctx context.Context, cfg *pgxpool.Config, what string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return pool, nil
}
