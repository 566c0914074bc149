package commands

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
)

// defaultMetricsListen is where the exporter listens unless told: loopback
// only, since the metrics describe an incident to whoever can read them.
const defaultMetricsListen = "127.0.0.1:9464"

// NewCmdMetrics builds `expiryctl metrics`, the Prometheus exporter.
func NewCmdMetrics(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metrics <command>",
		Short: "Expose the incident signals to Prometheus",
		Long: `Expose the archive's, the replays' and the live queues' signals in the
format a Prometheus server scrapes. docs/metrics.md lists every metric,
docs/alerts/ has alert rules over them and docs/dashboards/ a Grafana
dashboard.`,
		Example: `  expiryctl metrics serve --listen 127.0.0.1:9464`,
	}
	cmd.AddCommand(NewCmdMetricsServe(f, nil))
	return cmd
}

// MetricsServeOptions holds what `expiryctl metrics serve` needs.
type MetricsServeOptions struct {
	IO       *IOStreams
	Source   func(ctx context.Context, workQueue string) (metrics.Source, error)
	Recorder func(context.Context) (service.Recorder, error)

	Listen     string
	Interval   time.Duration
	WorkQueue  string
	MaxClasses int
}

// NewCmdMetricsServe builds `expiryctl metrics serve`.
func NewCmdMetricsServe(f *Factory, runF func(context.Context, *MetricsServeOptions) error) *cobra.Command {
	opts := &MetricsServeOptions{IO: f.IO, Source: f.MetricsSource, Recorder: f.Recorder}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the metrics over HTTP for Prometheus to scrape",
		Long: `Serve the incident signals at http://LISTEN/metrics until interrupted.

The numbers are read from the archive, the replay requests and RabbitMQ's
management API once every --interval, in the background; a scrape is
answered from the last reading and never reaches the database, so it costs
the same on a large archive. expiryctl_metrics_snapshot_age_seconds says how
old the reading is. A signal that cannot be read is left out (and
expiryctl_metrics_signal_available says so), never exported as zero.

When the policy sets a gap_query (` + "`policy set --template reservations`" + `), each
reading also counts the holds past their deadline in the reservation
database itself (--outcome-url, a read-only login):
expiryctl_reservation_holds_past_deadline, beside the archive's
expiryctl_overdue_holds; expiryctl_reservation_gap_query_up is 0 while the
reservation database cannot answer.

The readings are audited once, when the exporter starts (metrics.serve), not
once per refresh. Run it as a login of the expiryctl_operator group.`,
		Example: `  expiryctl metrics serve
  expiryctl metrics serve --listen 0.0.0.0:9464 --interval 30s

  # prometheus.yml
  scrape_configs:
    - job_name: expiryctl
      static_configs: [{targets: ["127.0.0.1:9464"]}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkMetricsFlags(opts.Interval, opts.MaxClasses); err != nil {
				return err
			}
			if opts.WorkQueue == "" {
				return flagErrorf("--work-queue must name the work queue, e.g. --work-queue reservation-expiry")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return metricsServeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", defaultMetricsListen, "address to serve /metrics on (port 0 picks a free one)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", metrics.DefaultInterval, "how often the numbers are read from the database and the broker")
	cmd.Flags().StringVar(&opts.WorkQueue, "work-queue", "reservation-expiry", "work queue whose retry queues and dead-letter queue (<name>.dlq) the live queue metrics cover")
	cmd.Flags().StringVar(&f.OutcomeURLFlag, "outcome-url", "",
		"the reservation database the policy's gap_query reads, a read-only login (or EXPIRYCTL_OUTCOME_URL; default: expiryctl's own database)")
	cmd.Flags().IntVar(&opts.MaxClasses, "max-classes", metrics.DefaultMaxClasses, "error classes exported by name, the most frequent first; the rest are summed as \"other\"")
	return cmd
}

func checkMetricsFlags(interval time.Duration, maxClasses int) error {
	if interval < time.Second {
		return flagErrorf("invalid interval %s: use 1s or more, e.g. 15s", interval)
	}
	if maxClasses < 1 || maxClasses > 100 {
		return flagErrorf("invalid --max-classes %d: use 1 to 100 (each class is a time series)", maxClasses)
	}
	return nil
}

func metricsServeRun(ctx context.Context, opts *MetricsServeOptions) error {
	ln, err := listenMetrics(opts.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	exp, err := startExporter(ctx, opts.IO, exporterSetup{
		source: opts.Source, recorder: opts.Recorder, workQueue: opts.WorkQueue, listen: ln.Addr().String(),
		interval: opts.Interval, maxClasses: opts.MaxClasses,
	})
	if err != nil {
		return err
	}
	return metrics.Serve(ctx, ln, metrics.Handler(metrics.NewRegistry(exp)))
}

func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve metrics on %s: %w: choose another address with the listen flag", addr, err)
	}
	return ln, nil
}

// exporterSetup is what startExporter needs, for `metrics serve` and `dlq
// ingest --metrics-listen` alike.
type exporterSetup struct {
	source     func(ctx context.Context, workQueue string) (metrics.Source, error)
	recorder   func(context.Context) (service.Recorder, error)
	workQueue  string
	listen     string
	interval   time.Duration
	maxClasses int
	// firstMayFail serves the exporter's own counters alone when the first
	// reading fails, saying so, rather than failing: for an ingest whose
	// login may capture but not read the archive.
	firstMayFail bool
}

// startExporter records the one audit row of the exporter's readings,
// takes the first snapshot (so that a wrong database or a login that may
// not read fails the command rather than every scrape, unless
// firstMayFail), says on stderr which signals are left out, and refreshes
// in the background until ctx is done.
func startExporter(ctx context.Context, io *IOStreams, s exporterSetup) (*metrics.Exporter, error) {
	src, err := s.source(ctx, s.workQueue)
	if err != nil {
		return nil, err
	}
	rec, err := s.recorder(ctx)
	if err != nil {
		return nil, err
	}
	if err := rec.Record(ctx, audit.Entry{Action: "metrics.serve", Details: map[string]any{
		"listen": s.listen, "interval": s.interval.String(), "work_queue": s.workQueue,
	}}); err != nil {
		return nil, err
	}
	exp := metrics.NewExporter(src, metrics.Options{Interval: s.interval, MaxClasses: s.maxClasses, Retry: reconnectWaits})
	snap, err := exp.Refresh(ctx)
	switch {
	case err != nil && !s.firstMayFail:
		return nil, fmt.Errorf("read the metrics: %w", err)
	case err != nil:
		// Not retried: a login that may not read would fail, and leave a
		// failed read in the audit trail, every interval.
		fmt.Fprintf(io.ErrOut, "warning: metrics: cannot read the archive, so only this process's own counters are served (reading it needs expiryctl_operator): %v\n", err)
		fmt.Fprintf(io.ErrOut, "serving metrics on http://%s/metrics\n", s.listen)
		return exp, nil
	}
	for _, m := range snap.Missing {
		fmt.Fprintf(io.ErrOut, "metrics: left out: %s\n", m)
	}
	go exp.Run(ctx, readingReporter(io.ErrOut, time.Now))
	fmt.Fprintf(io.ErrOut, "serving metrics on http://%s/metrics, read every %s\n", s.listen, phrase.Duration(s.interval))
	return exp, nil
}

// readingReporter says on w when the exporter's readings start failing
// (with why, again when why changes), each try after that with the wait
// before the next, and the recovery with how long it took.
func readingReporter(w io.Writer, now func() time.Time) func(err error, next time.Duration) {
	failing := ""
	tries := 0
	var since time.Time
	return func(err error, next time.Duration) {
		switch {
		case err != nil:
			tries++
			if tries == 1 {
				since = now()
			}
			if err.Error() != failing {
				failing = err.Error()
				fmt.Fprintf(w, "warning: metrics reading failed (try %d), serving the last good one meanwhile, reading again in %s: %s\n",
					tries, next.Round(10*time.Millisecond), errorLine(err))
				return
			}
			fmt.Fprintf(w, "metrics reading failed again (try %d), reading again in %s\n", tries, next.Round(10*time.Millisecond))
		case tries > 0:
			fmt.Fprintf(w, "metrics reading recovered after %s (%s)\n", now().Sub(since).Round(100*time.Millisecond), phrase.Count(tries, "failed try", "failed tries"))
			failing, tries = "", 0
		}
	}
}
