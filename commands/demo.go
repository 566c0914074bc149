package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/store"
)

// DemoOptions holds what `expiryctl demo` needs.
type DemoOptions struct {
	IO *IOStreams
	// DB and AMQP are the raw connections the simulation runs on (the
	// schema is migrated first, so DB does not check it).
	DB   func(context.Context) (*pgxpool.Pool, error)
	AMQP func() (*amqp.Connection, error)
	// Recorder, Ingester, Source and Archive record the run, capture its
	// dead letters and summarise them as `dlq ingest` and `dlq summary` do.
	Recorder func(context.Context) (service.Recorder, error)
	Ingester func(context.Context) (service.Ingester, error)
	Source   func(queue string, prefetch int) (service.DLQSource, error)
	Archive  func(context.Context) (service.Archive, error)
	// QueueName resolves a job store's URL to its queue's name as letters
	// carry it: through the configured connection that reaches its
	// server, else one of this process named by config.DeriveName.
	QueueName func(arg string) (string, error)

	Prefix string
	// SQS also stages an incident on SQS, through the AWS configuration
	// (AWS_ENDPOINT_URL_SQS for an SQS-compatible server), and captures it.
	SQS bool
	// River also stages an incident on River, in RiverDatabase on the
	// demo's server as the demo's login (default: the demo's database
	// name with _river after it), and captures it.
	River         bool
	RiverDatabase string
	// JobTable also stages an incident on a team's own jobs table
	// (demo.JobTable), in JobTableDatabase on the demo's server (default:
	// the demo's database name with _jobs after it), and says how to
	// approve its mapping and capture it. JobTableLogin, when set, is
	// granted exactly what expiryctl needs on the table.
	JobTable         bool
	JobTableDatabase string
	JobTableLogin    string
}

// NewCmdDemo builds `expiryctl demo`.
func NewCmdDemo(f *Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO, DB: f.RawDB, AMQP: f.AMQP,
		Recorder: f.Recorder, Ingester: f.Ingester, Source: f.DLQSource, Archive: f.Archive, QueueName: f.queueName}
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

With --sqs and --river it stages the same kind of incident on SQS and on
River too, and captures them into the same archive. River's incident lives in
a database of its own on the demo's server (--river-database, created when
missing if the login may): River's migrations are run there, expiry jobs for
due reservations are inserted, and a River client whose database deadlocks
fails them until River discards them.

With --job-table it stages one on a team's own jobs table, in a database of
its own too (--job-table-database): the table is created when missing, expiry
jobs for due reservations are inserted, and the team's poller, its database
timing out, marks them failed. It captures nothing: a jobs table is captured
only once one admin proposed its mapping and a second approved it, so the
demo prints the mapping to propose and the commands that follow.
--job-table-login grants a login exactly what capture and replay need.

Running it again is safe: every run uses ids of its own.`,
		Example: `  expiryctl demo
  expiryctl demo --prefix sandbox   # on queues named sandbox.*

  # and an SQS incident beside it, on a local SQS-compatible server
  AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4100 AWS_REGION=us-east-1 expiryctl demo --sqs

  # and a River incident, in database expiryctl_demo_river beside expiryctl_demo
  expiryctl demo --river

  # and a jobs table's, in expiryctl_demo_jobs, captured as login jobs_rw
  expiryctl demo --job-table --job-table-login jobs_rw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.RiverDatabase != "" && !opts.River {
				return flagErrorf("--river-database names River's database for --river: add --river")
			}
			if opts.River {
				if err := worker.ValidRiverQueue(riverDemoQueue(opts.Prefix)); err != nil {
					return flagErrorf("invalid --prefix %q for --river: %v", opts.Prefix, err)
				}
			}
			if (opts.JobTableDatabase != "" || opts.JobTableLogin != "") && !opts.JobTable {
				return flagErrorf("--job-table-database and --job-table-login are for --job-table: add --job-table")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "prefix for the exchange and queue names (default: the production names)")
	cmd.Flags().BoolVar(&opts.SQS, "sqs", false, "also stage an incident on SQS (queues PREFIX-reservation-expiry and -dlq) and capture it")
	cmd.Flags().BoolVar(&opts.River, "river", false, "also stage an incident on River (queue PREFIX-reservation-expiry) and capture it")
	cmd.Flags().StringVar(&opts.RiverDatabase, "river-database", "",
		"River's database for --river, on the demo's server, created when missing (default: the demo's database name + _river)")
	cmd.Flags().BoolVar(&opts.JobTable, "job-table", false, "also stage an incident on a team's own jobs table ("+demo.JobTable+"), for capture once its mapping is approved")
	cmd.Flags().StringVar(&opts.JobTableDatabase, "job-table-database", "",
		"the jobs table's database for --job-table, on the demo's server, created when missing (default: the demo's database name + _jobs)")
	cmd.Flags().StringVar(&opts.JobTableLogin, "job-table-login", "",
		"grant this login exactly what expiryctl needs on the jobs table (jobtable.GrantSQL), to capture and replay it as")
	return cmd
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	if _, err := store.MigrateDeployment(ctx, pool, "", registry.QueueSystems()...); err != nil {
		return err
	}
	conn, err := opts.AMQP()
	if err != nil {
		return err
	}
	topo := worker.NewTopology(opts.Prefix)
	res, err := demo.Run(ctx, demo.Deps{Pool: pool, AMQP: conn, Out: opts.IO.ErrOut, Topology: topo})
	auditErr := recordDemo(context.WithoutCancel(ctx), opts, audit.Entry{Action: "demo.run",
		Target: "queue:" + topo.Queue, Details: map[string]any{"run_id": res.RunID, "published": res.Published,
			"dead_lettered": res.DeadLettered}, Outcome: outcomeOf(err)})
	if err != nil {
		return err
	}
	if auditErr != nil {
		return auditErr
	}

	ingester, err := opts.Ingester(ctx)
	if err != nil {
		return err
	}
	src, err := opts.Source(topo.DeadLetterQueue, 1000)
	if err != nil {
		return err
	}
	defer src.Close()
	stats, err := ingester.Ingest(ctx, src, deadletter.IngestOptions{Queue: topo.DeadLetterQueue})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "captured %s from %s (%d new)\n\n", phrase.Count(stats.Received, "letter", "letters"), topo.DeadLetterQueue, stats.Stored)
	var sqsStaged *demo.SQSResult
	if opts.SQS {
		staged, err := demoSQS(ctx, opts, pool, res.RunID)
		if err != nil {
			return err
		}
		sqsStaged = &staged
	}
	var riverQueue string
	if opts.River {
		if riverQueue, err = demoRiver(ctx, opts, pool, res.RunID); err != nil {
			return err
		}
	}

	if opts.JobTable {
		if err := demoJobTable(ctx, opts, pool, res.RunID); err != nil {
			return err
		}
	}

	archive, err := opts.Archive(ctx)
	if err != nil {
		return err
	}
	summary, err := archive.Summary(ctx)
	if err != nil {
		return err
	}
	t := newTable(opts.IO, "CATEGORY", "WAITING", "QUEUES").truncatable("QUEUES")
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
		"  expiryctl dlq summary --work-queue %s\n"+
		"  expiryctl dlq list --reason transient-exhausted\n"+
		"  expiryctl dlq list --search %s\n"+
		"  expiryctl dlq show <ID from the list>\n", res.RunID, staged, topo.Queue, res.RunID)
	if sqsStaged != nil {
		fmt.Fprintf(opts.IO.ErrOut, "  expiryctl dlq list --search %s-sqs       # the SQS incident\n"+
			"  expiryctl replay request --search %s-sqs-worker --reason transient-exhausted --max 10 \\\n"+
			"      --routing-key %s --same-handler-ok \"why\" --why \"INC\"\n", res.RunID, res.RunID, sqsStaged.WorkARN)
	}
	if riverQueue != "" {
		fmt.Fprintf(opts.IO.ErrOut, "  expiryctl dlq list --search %s-river     # the River incident\n"+
			"  expiryctl replay request --search %s-river --reason transient-exhausted --max 10 \\\n"+
			"      --same-handler-ok \"why\" --why \"INC\"          # retried in place: no --routing-key\n"+
			"  expiryctl worker --river-queue %s      # works the retried jobs\n"+
			"  (replay run reaches River's database through the connection its letters name, in the configuration: docs/configuration.md)\n",
			res.RunID, res.RunID, riverQueue)
	}
	return nil
}

// riverDemoQueue is the River queue the demo stages its incident on:
// River allows no dots in a queue name, so the prefix is joined as SQS's.
func riverDemoQueue(prefix string) string {
	if prefix == "" {
		return "reservation-expiry"
	}
	return prefix + "-reservation-expiry"
}

// demoRiver stages the River incident in a database of its own on the
// demo's server and captures it as `dlq ingest` does. It returns the
// queue's URL as a worker reaches it, without a password.
func demoRiver(ctx context.Context, opts *DemoOptions, pool *pgxpool.Pool, runID string) (string, error) {
	conn := pool.Config().ConnConfig
	database := opts.RiverDatabase
	if database == "" {
		database = conn.Database + "_river"
	}
	if strings.HasPrefix(conn.Host, "/") {
		return "", fmt.Errorf("demo --river names River's database as river://HOST:PORT/…, and the database URL reaches %s through a socket: use a TCP address", conn.Database)
	}
	if err := demo.EnsureRiverDatabase(ctx, pool, database); err != nil {
		return "", err
	}
	// The demo's own login reaches River's database, so that one URL
	// stages everything; the ref is never shown with its password.
	u := sideDatabase(conn, "river", database, riverDemoQueue(opts.Prefix))
	ref, err := riverjobs.ParseRef(u.String())
	if err != nil {
		return "", err
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		return "", err
	}
	riverPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("demo: River's database %s: %w", ref.DatabaseName(), err)
	}
	defer riverPool.Close()
	if _, err := demo.RunRiver(ctx, demo.RiverDeps{River: riverPool, Queue: ref.Queue, RunID: runID, Pool: pool, Out: opts.IO.ErrOut}); err != nil {
		return "", err
	}
	ingester, err := opts.Ingester(ctx)
	if err != nil {
		return "", err
	}
	name, err := opts.QueueName(u.String())
	if err != nil {
		return "", err
	}
	src, err := opts.Source(name, 1000)
	if err != nil {
		return "", err
	}
	defer src.Close()
	stats, err := ingester.Ingest(ctx, src, deadletter.IngestOptions{Queue: src.QueueName()})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(opts.IO.ErrOut, "captured %s from %s (%d new)\n\n", phrase.Count(stats.Received, "letter", "letters"), src.QueueName(), stats.Stored)
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String(), nil
}

// sideDatabase is database on the demo's server, reached as the demo's
// login, named with scheme and path after the database: a job store's
// reference as the demo's own connection would make it.
func sideDatabase(conn *pgx.ConnConfig, scheme, database, path string) url.URL {
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(conn.Host, strconv.Itoa(int(conn.Port))), Path: "/" + database}
	if path != "" {
		u.Path += "/" + path
	}
	if conn.User != "" {
		u.User = url.User(conn.User)
		if conn.Password != "" {
			u.User = url.UserPassword(conn.User, conn.Password)
		}
	}
	if conn.TLSConfig == nil {
		u.RawQuery = "sslmode=disable"
	}
	return u
}

// demoJobTable stages the jobs-table incident in a database of its own on
// the demo's server. It captures nothing: a jobs table is captured only
// once two admins approved its mapping, which is the person's step, so it
// says what to propose and which commands follow.
func demoJobTable(ctx context.Context, opts *DemoOptions, pool *pgxpool.Pool, runID string) error {
	conn := pool.Config().ConnConfig
	database := opts.JobTableDatabase
	if database == "" {
		database = conn.Database + "_jobs"
	}
	if strings.HasPrefix(conn.Host, "/") {
		return fmt.Errorf("demo --job-table names the jobs table as jobtable://HOST:PORT/…, and the database URL reaches %s through a socket: use a TCP address", conn.Database)
	}
	if err := demo.EnsureDatabase(ctx, pool, database, "the jobs table's database"); err != nil {
		return err
	}
	owner := sideDatabase(conn, "postgres", database, "")
	jobsPool, err := pgxpool.New(ctx, owner.String())
	if err != nil {
		return fmt.Errorf("demo: the jobs table's database %s: %w", database, err)
	}
	defer jobsPool.Close()
	mapping, err := jobtable.ParseMapping([]byte(demo.JobTableMapping))
	if err != nil {
		return fmt.Errorf("demo: the jobs table's mapping: %w", err)
	}
	var grants []string
	if opts.JobTableLogin != "" {
		if grants, err = jobtable.GrantSQL(mapping, opts.JobTableLogin); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if _, err := demo.RunJobTable(ctx, demo.JobTableDeps{Jobs: jobsPool, Grants: grants, RunID: runID, Pool: pool, Out: opts.IO.ErrOut}); err != nil {
		return err
	}
	ref := sideDatabase(conn, "jobtable", database, mapping.Table)
	// The poller is the team's, as the table's owner: it updates columns
	// expiryctl's login may not. The line shows no password.
	ref.User = nil
	if conn.User != "" {
		ref.User = url.User(conn.User)
	}
	name, err := opts.QueueName(ref.String())
	if err != nil {
		return err
	}
	value, err := json.Marshal(map[string]jobtable.Mapping{name: mapping})
	if err != nil {
		return err
	}
	login := opts.JobTableLogin
	if login == "" {
		login = conn.User
	}
	// Captured through the configuration's connection to the table's
	// server when there is one; else through the URL, as a login of the
	// environment (and a replay needs the connection in the
	// configuration).
	capture := "expiryctl dlq ingest --queue " + name
	if typed, err := jobtable.ParseRef(ref.String()); err == nil && typed.Name() == name {
		capture = fmt.Sprintf("%s=%s expiryctl dlq ingest --queue %s", jobtable.UserEnv, login, (&url.URL{Scheme: ref.Scheme, Host: ref.Host, Path: ref.Path}).String())
	}
	fmt.Fprintf(opts.IO.ErrOut, "jobs table %s is captured and replayed only once two admins approved its mapping:\n"+
		"  expiryctl policy set job_tables='%s' --why \"INC\"\n"+
		"  expiryctl policy approve <ID> --why \"checked the columns\"        # as a second admin\n"+
		"  %s\n"+
		"  expiryctl worker --job-table %s      # the team's poller, for the replayed rows\n\n",
		name, value, capture, ref.String())
	return nil
}

// demoSQS stages the SQS incident and captures it as `dlq ingest` does.
func demoSQS(ctx context.Context, opts *DemoOptions, pool *pgxpool.Pool, runID string) (demo.SQSResult, error) {
	name := "reservation-expiry"
	if opts.Prefix != "" {
		name = opts.Prefix + "-" + name
	}
	client, err := sqsqueue.NewClient(ctx, sqsqueue.QueueRef{Name: name})
	if err != nil {
		return demo.SQSResult{}, err
	}
	staged, err := demo.RunSQS(ctx, demo.SQSDeps{Client: client, Prefix: opts.Prefix, RunID: runID, Pool: pool, Out: opts.IO.ErrOut})
	if err != nil {
		return staged, err
	}
	ingester, err := opts.Ingester(ctx)
	if err != nil {
		return staged, err
	}
	src, err := opts.Source("sqs://"+name+"-dlq", 1000)
	if err != nil {
		return staged, err
	}
	defer src.Close()
	stats, err := ingester.Ingest(ctx, src, deadletter.IngestOptions{Queue: src.QueueName()})
	if err != nil {
		return staged, err
	}
	fmt.Fprintf(opts.IO.ErrOut, "captured %s from %s (%d new)\n\n", phrase.Count(stats.Received, "letter", "letters"), src.QueueName(), stats.Stored)
	return staged, nil
}

// recordDemo records the demo's run, whether or not it went well.
func recordDemo(ctx context.Context, opts *DemoOptions, e audit.Entry) error {
	rec, err := opts.Recorder(ctx)
	if err != nil {
		return err
	}
	return rec.Record(ctx, e)
}

func outcomeOf(err error) audit.Outcome {
	if err != nil {
		return audit.Failed
	}
	return audit.OK
}
