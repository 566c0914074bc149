// Package bench is the benchmark behind `make bench` and
// cmd/expiryctl-bench. It measures expiryctl's capture and triage paths and prints
// each result as a ratio to a baseline measured in the same run, so that a
// busy or slow machine moves baseline and subject together instead of
// failing a fixed time budget. Only memory has an absolute ceiling.
//
//	go run ./cmd/expiryctl-bench         # full sizes: 100k letters ingested, 10k vs 1M archive
//	go run ./cmd/expiryctl-bench -quick  # quick run: 10k ingested, 1k vs 10k archive
//	go run ./cmd/expiryctl-bench -smoke  # does every scenario still run? (what TestSmoke runs)
//	make bench BENCH_ARGS='-only list,summary'
//
// Scenarios: ingest (deadletter.Ingest vs a bare amqp091 consumer that
// brackets it, before and after; plus, report-only, what parsing and storing
// each reach alone, and the binary's peak RSS), list (Archive.List page cost
// on a large archive, top and 90% deep, against a small one), summary
// (Archive.Signals, every signal of `dlq summary`, on large vs small; and
// `metrics serve`: one scrape, one snapshot refresh, and its peak RSS over
// 100 scrapes), export (`dlq list --limit 0 -o json`
// peak RSS, and its rate beside a COPY of the same rows), sqs-ingest
// (deadletter.Ingest from an SQS dead-letter queue on goaws vs a bare
// receive-and-delete loop that brackets it), sqs-replay (replay.Runner
// sending an approved cohort back to SQS through sqsqueue.Publisher vs a
// bare SendMessageBatch publisher that brackets it, and a bare
// SendMessage one), and for each job-store driver (River, BullMQ, a
// team's jobs table) NAME-ingest (deadletter.Ingest through the driver's
// source vs the bare reads of the same failed jobs, before and after) and
// NAME-replay (the driver's retrier retrying captured jobs as the runner
// publishes to it vs the store's bare retry call with the retrier's
// concurrency, before and after). Each scenario uses its own databases and queues and
// removes them at the end. Audit rows are written as the commands write
// them: they are part of the cost.
//
// Under the table, notes say where the CPU went during each timed ingest
// phase (RabbitMQ, goaws, Redis, the benchmark's PostgreSQL backends, a
// job store's database apart as jobs-pg, this
// process, the binary, and everything else), and warn when other processes
// took enough of the machine to make a ratio unreliable. Use -cpuprofile
// to see inside the in-process subjects.
//
// It exits 1 when a target is missed (unless -strict=false), 2 when a
// scenario could not be measured, 130 when interrupted.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// config is one run's sizes, endpoints and progress output.
type config struct {
	Strict bool
	Quick  bool
	// Smoke shrinks every scenario to seconds and leaves targets unenforced:
	// it proves that each scenario still runs and measures, not how fast.
	Smoke    bool
	Only     map[string]bool
	AdminURL string
	AMQPURL  string
	Bin      string
	// SQSEndpoint is the SQS-compatible server of the sqs-* scenarios.
	SQSEndpoint string
	// RedisAddr is the Redis of the bullmq-* scenarios, HOST:PORT.
	RedisAddr string

	IngestN  int
	SmallN   int
	LargeN   int
	Prefetch int
	// DLQVersion is the classic queue version of the capture scenarios'
	// dead-letter queues.
	DLQVersion int
	AckEvery   int
	Window     int
	Warmup     int
	Runs       int

	// SQSIngestN is the letters per queue of the sqs-ingest scenario.
	SQSIngestN int
	// SQSReplayN is the letters the sqs-replay scenario replays.
	SQSReplayN int
	// JobStoreN is the failed jobs each river-*, bullmq-* and jobtable-*
	// scenario seeds, captures or retries.
	JobStoreN int

	// Batch is passed to Ingest and `dlq ingest --batch`; 0 keeps the
	// product's default.
	Batch int
	// SkipIngestBinary leaves out the binary run of the ingest scenario,
	// for investigating ingest quickly.
	SkipIngestBinary bool

	start time.Time
}

var scenarios = []string{"ingest", "list", "summary", "export", "audit", "replay", "outcomes", "tui", "sqs-ingest", "sqs-replay",
	"river-ingest", "river-replay", "bullmq-ingest", "bullmq-replay", "jobtable-ingest", "jobtable-replay"}

// Main runs the benchmark with the command line's arguments (without the
// program name), prints the report on stdout and progress on stderr, and
// returns the process's exit code.
func Main(args []string, stdout io.Writer) int {
	cfg := &config{start: time.Now()}
	flags := flag.NewFlagSet("expiryctl-bench", flag.ContinueOnError)
	var only string
	flags.BoolVar(&cfg.Strict, "strict", true, "exit 1 when a target ratio or memory ceiling is missed")
	flags.BoolVar(&cfg.Quick, "quick", false, "smoke run: 10k letters instead of 100k ingested and 1M archived")
	flags.BoolVar(&cfg.Smoke, "smoke", false, "smoke test: every scenario at a tiny size, targets reported but not enforced (implies -quick -strict=false)")
	flags.StringVar(&only, "only", strings.Join(scenarios, ","), "comma-separated scenarios to run: "+strings.Join(scenarios, ", "))
	flags.StringVar(&cfg.AdminURL, "database-url", firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_DATABASE_URL"),
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"PostgreSQL maintenance database, to create and drop the benchmark's databases (env EXPIRYCTL_TEST_DATABASE_URL)")
	flags.StringVar(&cfg.AMQPURL, "amqp-url", firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_AMQP_URL"), os.Getenv("EXPIRYCTL_AMQP_URL"),
		broker.DefaultURL), "RabbitMQ URL (env EXPIRYCTL_TEST_AMQP_URL or EXPIRYCTL_AMQP_URL)")
	flags.StringVar(&cfg.SQSEndpoint, "sqs-endpoint", firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_SQS_ENDPOINT"), "http://127.0.0.1:4100"),
		"SQS-compatible server of the sqs-* scenarios (env EXPIRYCTL_TEST_SQS_ENDPOINT)")
	flags.StringVar(&cfg.RedisAddr, "redis-addr", firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_REDIS"), "127.0.0.1:6379"),
		"Redis of the bullmq-* scenarios, HOST:PORT (env EXPIRYCTL_TEST_REDIS)")
	flags.StringVar(&cfg.Bin, "bin", firstNonEmpty(os.Getenv("EXPIRYCTL_BIN"), "./bin/expiryctl"),
		"the built expiryctl binary (env EXPIRYCTL_BIN)")
	flags.IntVar(&cfg.IngestN, "ingest-n", 0, "letters per queue in the ingest scenario (default 100000, -quick 10000)")
	flags.IntVar(&cfg.SQSIngestN, "sqs-ingest-n", 0, "letters per queue in the sqs-ingest scenario (default 20000, -quick 5000)")
	flags.IntVar(&cfg.SQSReplayN, "sqs-replay-n", 0, "letters replayed in the sqs-replay scenario (default 10000, -quick 3000)")
	flags.IntVar(&cfg.JobStoreN, "jobstore-n", 0, "failed jobs in each river-*, bullmq-* and jobtable-* scenario (default 5000, -quick 1000)")
	flags.IntVar(&cfg.LargeN, "large-n", 0, "letters in the large archive (default 1000000, -quick 10000)")
	flags.IntVar(&cfg.SmallN, "small-n", 0, "letters in the baseline archive (default 10000, -quick 1000)")
	flags.IntVar(&cfg.Prefetch, "prefetch", 1000, "consumer prefetch for baseline and subject")
	flags.IntVar(&cfg.DLQVersion, "dlq-queue-version", 2, "classic queue version of the capture scenarios' DLQs: 2, as `dlq ingest` advises, or 1, RabbitMQ 3.10's default")
	flags.IntVar(&cfg.AckEvery, "bare-ack-every", 100,
		"the bare consumer acks with multiple=true every this many deliveries (100 drained fastest here, ahead of 500 and of acking each)")
	flags.IntVar(&cfg.Window, "confirm-window", 2000, "unconfirmed publishes in flight while filling queues")
	flags.IntVar(&cfg.Runs, "runs", 0, "timed rounds per latency probe (default 31, -quick 9)")
	flags.BoolVar(&cfg.SkipIngestBinary, "skip-ingest-binary", false, "skip the binary run in the ingest scenario (faster when investigating)")
	flags.IntVar(&cfg.Batch, "batch", 0, "ingest batch size for the subject and the binary (default: the product's default)")
	var archiveSize string
	flags.StringVar(&archiveSize, "archive", "", "instead of the other scenarios, the large-archive one at this size (e.g. 10m): list, summary, capture, purge, disk and memory on an archive that large")
	var cpuProfile string
	flags.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the benchmark process (in-process subjects) to this file")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected argument %q\n", flags.Arg(0))
		return 2
	}
	cfg.Only = map[string]bool{}
	if archiveSize != "" {
		n, err := parseArchiveSize(archiveSize)
		onlyGiven := false
		flags.Visit(func(f *flag.Flag) { onlyGiven = onlyGiven || f.Name == "only" || f.Name == "large-n" })
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		case onlyGiven:
			fmt.Fprintln(os.Stderr, "bench: -archive runs the large-archive scenario alone: leave out -only and -large-n")
			return 2
		}
		cfg.LargeN, only = n, ""
		cfg.Only["archive"] = true
	}
	for _, s := range strings.Split(only, ",") {
		if s == "" && archiveSize != "" {
			continue
		}
		s = strings.TrimSpace(s)
		if !contains(scenarios, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q in -only: use %s\n", s, strings.Join(scenarios, ", "))
			return 2
		}
		cfg.Only[s] = true
	}
	cfg.defaults()
	if abs, err := filepath.Abs(cfg.Bin); err == nil {
		cfg.Bin = abs
	}

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg.logf("sizes: ingest %d per queue, archives %d and %d; %d timed rounds after %d warm-up; %d cores",
		cfg.IngestN, cfg.SmallN, cfg.LargeN, cfg.Runs, cfg.Warmup, runtime.NumCPU())
	rep := &report{}
	if cfg.selected("ingest") {
		if err := benchIngest(ctx, cfg, rep); err != nil {
			rep.failed("ingest", err)
		}
	}
	if cfg.selected("archive") {
		if err := benchLargeArchive(ctx, cfg, rep); err != nil {
			rep.failed("archive", err)
		}
	}
	if ctx.Err() == nil && (cfg.selected("list") || cfg.selected("summary") || cfg.selected("export") || cfg.selected("tui")) {
		if err := benchArchives(ctx, cfg, rep); err != nil {
			rep.failed("archive", err)
		}
	}

	if ctx.Err() == nil && cfg.selected("replay") {
		lines, err := benchReplay(ctx, cfg)
		rep.lines = append(rep.lines, lines...)
		if err != nil {
			rep.failed("replay", err)
		}
	}
	if ctx.Err() == nil && cfg.selected("outcomes") {
		if err := benchOutcomes(ctx, cfg, rep); err != nil {
			rep.failed("outcomes", err)
		}
	}
	if ctx.Err() == nil && cfg.selected("sqs-ingest") {
		if err := benchSQSIngest(ctx, cfg, rep); err != nil {
			rep.failed("sqs-ingest", err)
		}
	}
	if ctx.Err() == nil && cfg.selected("sqs-replay") {
		if err := benchSQSReplay(ctx, cfg, rep); err != nil {
			rep.failed("sqs-replay", err)
		}
	}
	for _, kind := range jobStoreKinds {
		for _, s := range []struct {
			scenario string
			run      func(context.Context, *config, *report, jobStoreKind) error
		}{{kind.name + "-ingest", benchJobStoreIngest}, {kind.name + "-replay", benchJobStoreReplay}} {
			if ctx.Err() == nil && cfg.selected(s.scenario) {
				if err := s.run(ctx, cfg, rep, kind); err != nil {
					rep.failed(s.scenario, err)
				}
			}
		}
	}
	if ctx.Err() == nil && cfg.selected("audit") {
		if err := benchAudit(ctx, cfg, rep); err != nil {
			rep.failed("audit", err)
		}
	}

	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "expiryctl benchmark (%s run, %s, %d cores): subject / baseline, both measured in this run\n\n",
		cfg.mode(), time.Since(cfg.start).Round(time.Second), runtime.NumCPU())
	rep.print(stdout)
	fmt.Fprintln(stdout)
	failed, broken := rep.count(fail), rep.count(broken)
	fmt.Fprintf(stdout, "%d passed, %d failed, %d could not be measured, %d report-only\n", rep.count(pass), failed, broken, rep.count(info))
	switch {
	case ctx.Err() != nil:
		return 130
	case broken > 0:
		return 2
	case failed > 0 && cfg.Strict:
		return 1
	}
	return 0
}

func (c *config) defaults() {
	if c.Smoke {
		c.Quick, c.Strict = true, false
	}
	pick := func(v *int, full, quick, smoke int) {
		if *v <= 0 {
			switch {
			case c.Smoke:
				*v = smoke
			case c.Quick:
				*v = quick
			default:
				*v = full
			}
		}
	}
	pick(&c.IngestN, 100_000, 10_000, 500)
	// goaws walks a queue's messages on every receive and delete, so its
	// cost per letter grows with the queue: 20k takes about 4 s a drain
	// here, the scenario about 15 s.
	pick(&c.SQSIngestN, 20_000, 5_000, 200)
	// One SendMessage a message, as the runner sends to SQS, goes at
	// 1,300-3,500 a second here: 10k takes 3-8 s a run, the scenario
	// about 20 s.
	pick(&c.SQSReplayN, 10_000, 3_000, 200)
	// A job store is read or retried at thousands of jobs a second: 5k
	// keeps a phase near a second, and the six scenarios' smoke runs
	// to a few seconds each, mostly making and dropping databases.
	pick(&c.JobStoreN, 5_000, 1_000, 200)
	pick(&c.LargeN, 1_000_000, 10_000, 10_000)
	pick(&c.SmallN, 10_000, 1_000, 1_000)
	pick(&c.Runs, 31, 9, 3)
	pick(&c.Warmup, 5, 2, 1)
}

func (c *config) mode() string {
	switch {
	case c.Smoke:
		return "smoke"
	case c.Quick:
		return "quick"
	}
	return "full"
}

func (c *config) selected(scenario string) bool { return c.Only[scenario] }

// logf prints progress to stderr; the report goes to stdout.
func (c *config) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %6.1fs  %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

func (c *config) dropDB(db *benchDB) {
	if err := db.drop(); err != nil {
		c.logf("warning: %v", err)
	}
}

// binaryEnv points the built binary at one benchmark database and the
// benchmark's broker.
func (c *config) binaryEnv(databaseURL string) []string {
	return []string{"EXPIRYCTL_DATABASE_URL=" + databaseURL, "EXPIRYCTL_AMQP_URL=" + c.AMQPURL,
		"EXPIRYCTL_ACTOR=bench-binary", "NO_COLOR=1"}
}

// count formats a letter count the way the report names archives: 10k, 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
