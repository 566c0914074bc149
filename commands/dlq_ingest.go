package commands

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// DLQIngestOptions holds what `expiryctl dlq ingest` needs.
type DLQIngestOptions struct {
	IO       *IOStreams
	Ingester func(context.Context) (service.Ingester, error)
	// Source opens a consumer on a queue, allowed prefetch letters ahead.
	Source func(queue string, prefetch int) (service.DLQSource, error)
	Signer func(context.Context) (service.AuditSigner, error)
	// MetricsSource and Recorder serve --metrics-listen: the archive's
	// numbers, and the one audit row of reading them.
	MetricsSource func(ctx context.Context, workQueue string) (metrics.Source, error)
	Recorder      func(context.Context) (service.Recorder, error)
	Getenv        func(string) string
	// PingDB, with Follow, checks that PostgreSQL answers again before a
	// consumer is reopened after an outage.
	PingDB func(context.Context) error
	// LiveQueues, when set, reads the DLQ's storage from the broker's
	// management API, to advise on it before the capture starts.
	LiveQueues func(context.Context) (service.LiveQueues, error)
	// Backoff spaces the reconnection tries of Follow (nil:
	// reconnectWaits).
	Backoff func() retry.Backoff

	// Queue is the queue as letters name it: a job store's URL on the
	// command line is resolved to its connection's name before the run
	// (typedQueue), and the Factory keeps how to reach it.
	Queue       string
	Batch       int
	Prefetch    int
	Follow      bool
	ClassesFile string
	// CheckpointKey, with Follow, signs a checkpoint of the audit trail
	// every CheckpointEvery.
	CheckpointKey   string
	CheckpointEvery time.Duration
	// MetricsListen, with Follow, serves the metrics of `metrics serve`
	// and this process's own ingest counters there, read every
	// MetricsInterval.
	MetricsListen   string
	MetricsInterval time.Duration
	Output          *outputFormat

	// Connection names the connection a queue is on, which its letters
	// record ("" for a job store's, whose queue name says it); nil: the
	// archive's rule alone.
	Connection func(queue string) (string, error)

	// progress is the progress line on stderr; nil: newProgressLine.
	progress *progressLine
}

// NewCmdDLQIngest builds `expiryctl dlq ingest`.
func NewCmdDLQIngest(f *Factory, runF func(context.Context, *DLQIngestOptions) error) *cobra.Command {
	opts := &DLQIngestOptions{IO: f.IO, Ingester: f.Ingester, Source: f.DLQSource, Signer: f.AuditSigner,
		MetricsSource: f.MetricsSource, Recorder: f.Recorder, Getenv: f.Getenv, PingDB: f.PingDB, LiveQueues: f.LiveQueues,
		Connection: f.connectionOfQueue}
	cmd := &cobra.Command{
		Use:   "ingest --queue QUEUE",
		Short: "Capture a dead-letter queue into the archive",
		Long: `Drain a dead-letter queue into PostgreSQL.

Letters are acknowledged only after the transaction that stores them has
committed, a batch at a time. A copy of a letter already stored (a redelivery,
or the duplicate a crashed worker can leave) is skipped. Nothing is dropped: a
payload or header that cannot be understood is stored as received, with the
category "malformed" or "unknown".

Without --follow, ingest exits once the queue is empty. With it, ingest keeps
capturing until interrupted; on SIGINT or SIGTERM the batch being written is
committed and acknowledged, and the rest stays in the queue. A followed
capture outlives a restart of RabbitMQ or PostgreSQL: it says on stderr what
it lost, and tries again after a wait that doubles from half a second up to
30 seconds (at random within its upper half); letters received and not
committed go back to the queue unacknowledged and are captured once it is
back. A refused login, a deleted queue or a refusal of the database ends it.

Several ingest processes may run on the same queue at once.

The queue is RabbitMQ's unless --queue names an Amazon SQS queue: sqs://NAME
(in the region of the context's SQS connection, else of the AWS configuration:
AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_SQS, …) or the queue's URL, which
must not name another region than the connection's. From SQS a message is
deleted only after its batch committed; while the batch is stored its
visibility is extended, so no other consumer gets it. Throttling and 5xx
answers are retried with backoff, and a followed capture waits out an SQS
that does not answer. docs/sqs.md says what is kept of each message.

` + jobStoresHelp(),
		Example: `  # capture what is there now
  expiryctl dlq ingest --queue reservation-expiry.dlq

  # keep capturing during an incident
  expiryctl dlq ingest --queue reservation-expiry.dlq --follow

  # and serve Prometheus metrics meanwhile, with this capture's own counters
  expiryctl dlq ingest --queue reservation-expiry.dlq --follow --metrics-listen 127.0.0.1:9464

  # and sign a checkpoint of the audit trail every 5 minutes meanwhile
  # (the login is in the auditor group too: only auditors record checkpoints)
  expiryctl dlq ingest --queue reservation-expiry.dlq --follow --checkpoint-key audit.key --checkpoint-every 5m

  # capture an Amazon SQS dead-letter queue
  expiryctl dlq ingest --queue https://sqs.eu-west-1.amazonaws.com/123456789012/reservation-expiry-dlq
  AWS_REGION=eu-west-1 expiryctl dlq ingest --queue sqs://reservation-expiry-dlq --follow

  # capture the jobs River discarded in queue "expiry", through the
  # configuration's connection "river"
  expiryctl dlq ingest --queue river://river/expiry

  # the same by URL, when no connection is configured for it
  export EXPIRYCTL_RIVER_PASSWORD=…
  expiryctl dlq ingest --queue river://reader@jobs-db/reservations/expiry

  # capture the failed jobs of the BullMQ queue "reservation-expiry"
  expiryctl dlq ingest --queue bullmq://redis/bull/reservation-expiry --follow

  # map your own error classes to categories
  expiryctl dlq ingest --queue reservation-expiry.dlq --classes classes.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Queue == "" {
				return flagErrorf("--queue is required: name the dead-letter queue, e.g. --queue reservation-expiry.dlq")
			}
			if b, ok := brokerNamed(opts.Queue); ok {
				if err := b.CheckRef(opts.Queue); err != nil {
					return &FlagError{Err: err}
				}
			}
			name, err := f.queueName(opts.Queue)
			if err != nil {
				return err
			}
			opts.Queue = name
			if opts.Batch < 1 || opts.Batch > 10000 {
				return flagErrorf("invalid --batch %d: use 1 to 10000", opts.Batch)
			}
			if opts.Prefetch < 1 || opts.Prefetch > 65535 {
				return flagErrorf("invalid --prefetch %d: use 1 to 65535", opts.Prefetch)
			}
			if opts.ClassesFile == "" {
				opts.ClassesFile = opts.Getenv("EXPIRYCTL_CLASSES")
			}
			if opts.CheckpointKey != "" && !opts.Follow {
				return flagErrorf("--checkpoint-key is for --follow: a run that ends can be followed by `expiryctl audit checkpoint`")
			}
			if opts.CheckpointEvery < time.Second {
				return flagErrorf("invalid --checkpoint-every %s: use 1s or more, e.g. 5m", opts.CheckpointEvery)
			}
			if opts.MetricsListen != "" && !opts.Follow {
				return flagErrorf("--metrics-listen is for --follow: a run that ends has nothing to scrape; `expiryctl metrics serve` serves the archive's metrics")
			}
			if err := checkMetricsFlags(opts.MetricsInterval, metrics.DefaultMaxClasses); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqIngestRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Queue, "queue", "q", "", "dead-letter queue to capture: a RabbitMQ queue's name, sqs://NAME or an SQS queue URL, or a job store's "+jobStorePrefixes()+" (required)")
	cmd.Flags().IntVar(&opts.Batch, "batch", 500, "letters stored and acknowledged per transaction")
	cmd.Flags().IntVar(&opts.Prefetch, "prefetch", 1000, "unacknowledged letters the broker may send ahead")
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep capturing until interrupted")
	cmd.Flags().StringVar(&opts.ClassesFile, "classes", "", "JSON file mapping error classes to categories (env EXPIRYCTL_CLASSES)")
	cmd.Flags().StringVar(&opts.CheckpointKey, "checkpoint-key", "", "with --follow: sign a checkpoint of the audit trail with this key (from audit keygen) periodically")
	cmd.Flags().DurationVar(&opts.CheckpointEvery, "checkpoint-every", 5*time.Minute, "with --checkpoint-key: how often")
	cmd.Flags().StringVar(&opts.MetricsListen, "metrics-listen", "", "with --follow: serve Prometheus metrics (those of metrics serve, and this capture's counters) on this address")
	cmd.Flags().DurationVar(&opts.MetricsInterval, "metrics-interval", metrics.DefaultInterval, "with --metrics-listen: how often the archive's numbers are read")
	opts.Output = addOutputFlag(cmd, "text", "json")
	_ = cmd.MarkFlagFilename("classes", "json")
	return cmd
}

func dlqIngestRun(ctx context.Context, opts *DLQIngestOptions) error {
	classifier := deadletter.DefaultClassifier()
	if opts.ClassesFile != "" {
		var err error
		if classifier, err = deadletter.LoadClassifier(opts.ClassesFile); err != nil {
			return &FlagError{Err: err}
		}
	}
	ingester, err := opts.Ingester(ctx)
	if err != nil {
		return err
	}
	// Batches are pipelined: two are written while the next is received, so
	// the broker must be allowed to send at least three batches ahead.
	prefetch := max(opts.Prefetch, 3*opts.Batch)
	src, err := opts.Source(opts.source(), prefetch)
	if err != nil {
		return err
	}
	// A followed capture may end on another source than the first.
	defer func() { _ = src.Close() }()

	if opts.progress == nil {
		opts.progress = newProgressLine(opts.IO.ErrOut)
	}
	if advice := dlqStorageAdvice(ctx, opts); advice != "" {
		opts.progress.say("note: " + advice)
	}
	if opts.CheckpointKey != "" {
		key, err := os.ReadFile(opts.CheckpointKey)
		if err != nil {
			return fmt.Errorf("cannot read --checkpoint-key: %w", err)
		}
		signer, err := opts.Signer(ctx)
		if err != nil {
			return err
		}
		checkpoints, stop := context.WithCancel(ctx)
		defer stop()
		go signer.SignEvery(checkpoints, string(key), opts.CheckpointEvery, func(cp audit.Checkpoint, err error) {
			if err != nil {
				opts.progress.say(fmt.Sprintf("warning: no audit checkpoint this time: %v", err))
				return
			}
			opts.progress.say(fmt.Sprintf("signed audit checkpoint of %d rows by %s, root %s", cp.Size, cp.SignedBy(), cp.Root))
		})
	}

	progress := func(deadletter.IngestStats) {}
	if opts.IO.StderrTTY {
		last := time.Time{}
		progress = func(s deadletter.IngestStats) {
			if time.Since(last) < 200*time.Millisecond {
				return
			}
			last = time.Now()
			opts.progress.show(fmt.Sprintf("ingesting %s: %d stored, %s, %.0f msgs/s",
				termsafe.EscapeLine(opts.Queue), s.Stored, phrase.Count(s.Duplicates, "duplicate", "duplicates"), s.Rate()))
		}
	}
	lost := func(string) {}
	if opts.MetricsListen != "" {
		counters, stopMetrics, err := serveIngestMetrics(ctx, opts)
		if err != nil {
			return err
		}
		defer stopMetrics()
		show := progress
		progress = func(s deadletter.IngestStats) {
			counters.Observe(s.Stored, s.Duplicates, s.Batches)
			show(s)
		}
		lost = func(server string) { counters.Lost(lostServerLabel[server]) }
	}
	// Say at once what is being done: a follow that waits for its first
	// letter must not look like a hang.
	until := "until it is empty"
	if opts.Follow {
		until = "until interrupted (Ctrl-C finishes the batch in hand)"
	}
	if waiting, err := src.Ready(); err == nil {
		fmt.Fprintf(opts.IO.ErrOut, "capturing %s %s: %s waiting\n", opts.Queue, until, phrase.Count(waiting, "letter", "letters"))
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "capturing %s %s\n", opts.Queue, until)
	}
	// The audit trail names the queue as the letters do: an SQS queue by
	// its ARN, whatever URL or name the flag gave.
	queue := opts.Queue
	if name := src.QueueName(); name != "" {
		queue = name
	}
	run := deadletter.IngestOptions{
		Queue: queue, Batch: opts.Batch, Follow: opts.Follow,
		Classifier: classifier, Progress: progress,
	}
	if opts.Connection != nil {
		if run.Connection, err = opts.Connection(opts.Queue); err != nil {
			return err
		}
	}
	var stats deadletter.IngestStats
	if opts.Follow {
		stats, src, err = followIngest(ctx, opts, ingester, src, run, prefetch, lost)
	} else {
		stats, err = ingester.Ingest(ctx, src, run)
	}
	if opts.IO.StderrTTY {
		opts.progress.clear()
	}
	if err != nil {
		return err
	}
	// An interrupted capture says what it left behind: the letters still in
	// the queue, and those it had received but not committed, which go back
	// to the queue unacknowledged when the consumer closes.
	interrupted, left := ctx.Err() != nil, -1
	if interrupted {
		_ = src.Close()
		if n, err := src.Ready(); err == nil {
			left = n
		}
	}
	if opts.Output.value == "json" {
		doc := map[string]any{"queue": opts.Queue, "received": stats.Received,
			"stored": stats.Stored, "duplicates": stats.Duplicates, "seconds": stats.Elapsed.Seconds(), "interrupted": interrupted}
		if left >= 0 {
			doc["left_in_queue"] = left
		}
		return writeJSON(opts.IO.Out, doc)
	}
	verb := "ingested"
	if interrupted {
		verb = "interrupted: ingested"
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s %s from %s: %d stored, %s, in %s (%.0f msgs/s)\n",
		verb, phrase.Count(stats.Received, "letter", "letters"), opts.Queue, stats.Stored, phrase.Count(stats.Duplicates, "duplicate", "duplicates"),
		stats.Elapsed.Round(time.Millisecond), stats.Rate())
	switch {
	case interrupted && left > 0:
		fmt.Fprintf(opts.IO.ErrOut, "%s left in %s, none lost: capture them with `expiryctl dlq ingest --queue %s`\n",
			phrase.Count(left, "letter", "letters"), opts.Queue, opts.Queue)
	case interrupted && left < 0:
		fmt.Fprintf(opts.IO.ErrOut, "could not read what is left in %s; letters not committed were not acknowledged and stay there\n", opts.Queue)
	}
	return nil
}

// lostServerLabel is the server label of a loss that deadletter reports:
// a job store's as its driver labels it.
var lostServerLabel = func() map[string]string {
	labels := map[string]string{"RabbitMQ": metrics.LostRabbitMQ, "SQS": metrics.LostSQS, "PostgreSQL": metrics.LostPostgreSQL}
	for _, s := range registry.JobStores() {
		labels[s.Words().Server] = s.Words().ServerLabel
	}
	return labels
}()

// serveIngestMetrics serves, on --metrics-listen, what `metrics serve`
// serves for the queue's topology, and the counters of this capture, which
// it returns with the function that stops serving (as ctx's end does).
func serveIngestMetrics(ctx context.Context, opts *DLQIngestOptions) (*metrics.IngestCounters, func(), error) {
	ln, err := listenMetrics(opts.MetricsListen)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	exp, err := startExporter(ctx, opts.IO, exporterSetup{
		source: opts.MetricsSource, recorder: opts.Recorder, workQueue: replay.WorkQueueOf(opts.Queue),
		listen: ln.Addr().String(), interval: opts.MetricsInterval, maxClasses: metrics.DefaultMaxClasses,
		firstMayFail: true,
	})
	if err != nil {
		cancel()
		_ = ln.Close()
		return nil, nil, err
	}
	counters := metrics.NewIngestCounters(opts.Queue)
	handler := metrics.Handler(metrics.NewRegistry(exp, counters))
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := metrics.Serve(ctx, ln, handler); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "warning: serving metrics stopped: %v\n", err)
		}
	}()
	return counters, func() { cancel(); <-served }, nil
}

// dlqStorageAdvice is queueVersionAdvice for the queue being captured,
// when the broker's management API says, within a second, that it is the
// dead-letter queue of its topology (<work queue>.dlq) and a classic queue
// of version 1; otherwise "". It is advice: an API that cannot be read is
// not mentioned.
func dlqStorageAdvice(ctx context.Context, opts *DLQIngestOptions) string {
	// Only a routed broker's queues have a storage version to advise on.
	if d := driverOfQueue(opts.Queue); opts.LiveQueues == nil || !d.Traits().Routes {
		return ""
	}
	read, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	queues, err := opts.LiveQueues(read)
	if err != nil {
		return ""
	}
	report, err := queues.Topology(read, replay.WorkQueueOf(opts.Queue))
	if err != nil {
		return ""
	}
	for _, q := range report.Queues {
		if q.Name == opts.Queue && q.PagesUnderCapture() {
			return queueVersionAdvice(q.Name)
		}
	}
	return ""
}
