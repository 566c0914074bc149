package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// WorkerOptions holds what `expiryctl worker` needs.
type WorkerOptions struct {
	IO   *IOStreams
	DB   func(context.Context) (*pgxpool.Pool, error)
	AMQP func() (*amqp.Connection, error)

	Prefix      string
	MaxAttempts int
	Concurrency int
}

// NewCmdWorker builds `expiryctl worker`, the reference expiry worker.
func NewCmdWorker(f *Factory, runF func(context.Context, *WorkerOptions) error) *cobra.Command {
	opts := &WorkerOptions{IO: f.IO, DB: f.RawDB, AMQP: f.AMQP}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the reference reservation-expiry worker",
		Long: `Run the reference worker of the message contract until interrupted.

It expires reservations exactly once per idempotency key, acknowledges only
after its transaction committed, retries transient failures through TTL retry
queues with capped exponential backoff and jitter, and dead-letters permanent
failures and exhausted budgets with the contract's headers. It is what the demo
and the end-to-end tests run; point your own worker at docs/message-contract.md.`,
		Example: `  expiryctl worker
  expiryctl worker --prefix sandbox --max-attempts 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.MaxAttempts < 1 {
				return flagErrorf("invalid --max-attempts %d: use 1 or more", opts.MaxAttempts)
			}
			if opts.Concurrency < 1 {
				return flagErrorf("invalid --concurrency %d: use 1 or more", opts.Concurrency)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return workerRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "prefix for the exchange and queue names (default: the production names)")
	cmd.Flags().IntVar(&opts.MaxAttempts, "max-attempts", 5, "attempts before a transient failure is dead-lettered")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 4, "jobs processed at once")
	return cmd
}

func workerRun(ctx context.Context, opts *WorkerOptions) error {
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	conn, err := opts.AMQP()
	if err != nil {
		return err
	}
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
	fmt.Fprintf(opts.IO.ErrOut, "worker consuming %s (dead letters go to %s); Ctrl-C stops it\n", topo.Queue, topo.DeadLetterQueue)
	err = worker.Run(ctx, worker.Deps{Pool: pool, AMQP: conn, Topology: topo,
		Config: worker.Config{MaxAttempts: opts.MaxAttempts, Concurrency: opts.Concurrency}})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}
