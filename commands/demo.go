package commands

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/store"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// DemoOptions holds what `expiryctl demo` needs.
type DemoOptions struct {
	IO    *IOStreams
	Actor func() string
	DB    func(context.Context) (*pgxpool.Pool, error)
	AMQP  func() (*amqp.Connection, error)

	Prefix string
}

// NewCmdDemo builds `expiryctl demo`.
func NewCmdDemo(f *Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO, Actor: f.Actor, DB: f.RawDB, AMQP: f.AMQP}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Stage a realistic incident on the local services and capture it",
		Long: `Stage an incident and capture it, so that every other command has something
to show.

The demo migrates the schema, declares the reservation-expiry topology,
creates reservations, and runs the reference worker through bad inputs and a
simulated database outage, while RabbitMQ expires jobs no worker picked up. The
dead letters (at least five reason categories, some made by the broker) are
then captured with the same code as ` + "`dlq ingest`" + ` and summarised.

Running it again is safe: every run uses ids of its own.`,
		Example: `  expiryctl demo
  expiryctl demo --prefix sandbox   # on queues named sandbox.*`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "prefix for the exchange and queue names (default: the production names)")
	return cmd
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	if _, err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	conn, err := opts.AMQP()
	if err != nil {
		return err
	}
	topo := worker.NewTopology(opts.Prefix)
	res, err := demo.Run(ctx, demo.Deps{Pool: pool, AMQP: conn, Out: opts.IO.ErrOut, Topology: topo})
	auditErr := audit.Record(context.WithoutCancel(ctx), pool, audit.Entry{Actor: opts.Actor(), Action: "demo.run",
		Target: "queue:" + topo.Queue, Details: map[string]any{"run_id": res.RunID, "published": res.Published,
			"dead_lettered": res.DeadLettered}, Outcome: outcomeOf(err)})
	if err != nil {
		return err
	}
	if auditErr != nil {
		return auditErr
	}

	src, err := broker.OpenDLQSource(conn, topo.DeadLetterQueue, 1000)
	if err != nil {
		return err
	}
	defer src.Close()
	stats, err := deadletter.Ingest(ctx, pool, src, deadletter.IngestOptions{Actor: opts.Actor(), Queue: topo.DeadLetterQueue})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "captured %d letters from %s (%d new)\n\n", stats.Received, topo.DeadLetterQueue, stats.Stored)

	summary, err := deadletter.NewArchive(pool, opts.Actor()).Summary(ctx)
	if err != nil {
		return err
	}
	t := newTable(opts.IO, "CATEGORY", "WAITING", "QUEUES")
	for _, s := range summary {
		t.addRow(string(s.Category), fmt.Sprint(s.Count), fmt.Sprint(s.Queues))
	}
	if err := t.render(); err != nil {
		return err
	}
	staged := make([]string, 0, len(res.ByCategory))
	for c, n := range res.ByCategory {
		staged = append(staged, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(staged)
	fmt.Fprintf(opts.IO.ErrOut, "\nthis run (%s) staged %v\n\nnext, try:\n"+
		"  expiryctl dlq list --reason transient-exhausted\n"+
		"  expiryctl dlq list --search %s\n"+
		"  expiryctl dlq show <ID from the list>\n", res.RunID, staged, res.RunID)
	return nil
}

func outcomeOf(err error) audit.Outcome {
	if err != nil {
		return audit.Failed
	}
	return audit.OK
}
