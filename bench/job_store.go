package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// jobRetryWindow is how many publishes replay.Runner keeps unsettled (its
// window, as sqsReplayWindow). A job store's retrier takes them all at
// once and works them its own concurrency at a time, so the window only
// queues them: the baselines use the retrier's concurrency, not this.
const jobRetryWindow = sqsReplayWindow

// jobStoreKind is one job-store driver's pair of scenarios, NAME-ingest and
// NAME-replay.
type jobStoreKind struct {
	name string
	// line numbers the report's lines of both scenarios.
	line int
	open func(ctx context.Context, cfg *config, n int) (*jobStore, error)
}

// jobStoreKinds are the drivers the job-store scenarios measure, in the
// order they run.
var jobStoreKinds = []jobStoreKind{
	{"river", 9, openRiverStore},
	{"bullmq", 10, openBullMQStore},
	{"jobtable", 11, openJobTableStore},
}

// jobStore is n failed jobs seeded where one driver reads them, in a
// database or under a Redis prefix of the scenario's own, with the
// driver's capture and retrier and the bare calls under them. Reading the
// jobs changes nothing, so the same jobs serve both sides of an ingest;
// a retry moves them, and fail puts them back for the next phase.
type jobStore struct {
	system deadletter.System
	// queue is the store's queue as letters name it.
	queue string

	openSource func(ctx context.Context, prefetch int) (deadletter.ClosableSource, error)
	// openBareRead opens the connection of a phase of bare reads, and
	// what closes it.
	openBareRead func(ctx context.Context) (bareRead, func(), error)
	bareReadName string

	// fail puts every job back in its failed state as a new failure (a
	// new incarnation), as if each had failed again.
	fail func(ctx context.Context) error
	// retried counts the jobs in the state a retry puts them in.
	retried     func(ctx context.Context) (int, error)
	openRetrier func(ctx context.Context) (replay.Broker, error)
	// bareRetry makes the jobs runnable again with the store's own call,
	// retrierConcurrency at a time.
	bareRetry     func(ctx context.Context, jobs []replay.JobRef) error
	bareRetryName string
	// retrierConcurrency is how many retries the driver's retrier, opened
	// as `replay run` opens it, has in flight.
	retrierConcurrency int

	// close removes what the store seeded; it does not take the
	// scenario's context, so that an interrupted run cleans up too.
	close func()
}

// jobStoreMinPhase is the least a timed phase lasts. A bare read of a
// thousand jobs takes about 10 ms, /proc's tick, and a BullMQ retry of as
// many 20-40 ms: done once, their CPU would round to 0 or a whole tick, so
// a phase is done again until this much timed work has passed (once in a
// smoke run, which measures nothing).
const jobStoreMinPhase = 300 * time.Millisecond

// bareRead reads the n failed jobs' columns or fields, as the driver's
// capture reads them, and nothing else.
type bareRead func(ctx context.Context, n int) error

// jobStorePhase is one timed side of a job-store scenario; items is the
// jobs it read or retried, n times its rounds.
type jobStorePhase struct {
	name  string
	wall  time.Duration
	cpu   cpuUse
	items int
}

// benchJobStoreIngest is the NAME-ingest scenario: n failed jobs read with
// the bare reads, then captured into a fresh archive with
// deadletter.Ingest through the driver's source, as `dlq ingest --queue
// NAME://…` captures them, then read bare again, so that the baseline
// brackets the subject.
func benchJobStoreIngest(ctx context.Context, cfg *config, rep *report, kind jobStoreKind) error {
	scenario := kind.name + "-ingest"
	n := cfg.JobStoreN
	cfg.logf("%s: seeding %d failed jobs (not timed)", scenario, n)
	st, err := kind.open(ctx, cfg, n)
	if err != nil {
		return err
	}
	defer st.close()

	var phases []jobStorePhase
	bare := func() (time.Duration, int, error) {
		cfg.logf("%s: baseline: %s of %d jobs, again until %s have passed", scenario, st.bareReadName, n, jobStoreMinPhase)
		rounds := 0
		mon := startCPU()
		start := time.Now()
		read, closeRead, err := st.openBareRead(ctx)
		if err != nil {
			mon.Stop()
			return 0, 0, err
		}
		for rounds == 0 || (!cfg.Smoke && time.Since(start) < jobStoreMinPhase) {
			if err := read(ctx, n); err != nil {
				mon.Stop()
				closeRead()
				return 0, 0, fmt.Errorf("baseline %s: %w", st.bareReadName, err)
			}
			rounds++
		}
		d := time.Since(start)
		use := mon.Stop()
		closeRead()
		phases = append(phases, jobStorePhase{fmt.Sprintf("baseline %s (%d rounds)", st.bareReadName, rounds), d, use, rounds * n})
		cfg.logf("%s: baseline %d rounds of %d jobs in %s = %.0f jobs/s", scenario, rounds, n, d.Round(time.Millisecond),
			float64(rounds*n)/d.Seconds())
		return d, rounds * n, nil
	}
	base1, read1, err := bare()
	if err != nil {
		return err
	}
	db, err := createDB(ctx, cfg.AdminURL, kind.name+"ingest")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	prefetch := ingestPrefetch(cfg.Prefetch, cfg.Batch)
	cfg.logf("%s: subject: deadletter.Ingest of %s into %s (prefetch %d, batch %s)", scenario, st.queue, db.Name, prefetch, batchName(cfg.Batch))
	mon := startCPU()
	start := time.Now()
	stats, closeSource, err := jobStoreIngest(ctx, st, db, prefetch, cfg.Batch)
	subjDur := time.Since(start)
	subjCPU := mon.Stop()
	closeSource()
	if err != nil {
		return fmt.Errorf("deadletter.Ingest from %s: %w", st.queue, err)
	}
	if err := expectArchived(ctx, db.Pool, n); err != nil {
		return err
	}
	phases = append(phases, jobStorePhase{"subject deadletter.Ingest", subjDur, subjCPU, n})
	subjRate := float64(n) / subjDur.Seconds()
	cfg.logf("%s: subject %d jobs in %s = %.0f jobs/s (%d batches)", scenario, stats.Received, subjDur.Round(time.Millisecond), subjRate, stats.Batches)
	base2, read2, err := bare()
	if err != nil {
		return err
	}
	baseRate := float64(read1+read2) / (base1 + base2).Seconds()
	rep.throughputInfo(fmt.Sprintf("%d %s %s: deadletter.Ingest vs %s", kind.line, scenario, count(n), st.bareReadName), baseRate, subjRate, "jobs/s")
	jobStoreNotes(rep, fmt.Sprintf("%d %s", kind.line, scenario), scenario, phases)
	return nil
}

// jobStoreIngest is what `dlq ingest --queue NAME://…` does once it has
// parsed the reference: open the driver's source with the command's
// prefetch, then deadletter.Ingest until the source says every failed job
// was delivered. A job store is never emptied, so Ingest ends on its
// linger timer and Ready, a tail the bare read, told n, does not have.
// The source is closed by the caller once the phase's CPU was read, so
// that the monitor still sees the source's backends.
func jobStoreIngest(ctx context.Context, st *jobStore, db *benchDB, prefetch, batch int) (deadletter.IngestStats, func(), error) {
	src, err := st.openSource(ctx, prefetch)
	if err != nil {
		return deadletter.IngestStats{}, func() {}, err
	}
	stats, err := deadletter.Ingest(ctx, db.Pool, src, deadletter.IngestOptions{Actor: "bench", Queue: st.queue, Batch: batch})
	return stats, func() { _ = src.Close() }, err
}

// benchJobStoreReplay is the NAME-replay scenario: n captured jobs retried
// with the store's bare call, then through the driver's retrier as
// replay.Runner publishes to it (every job a replay.Message with the
// runner's marks, up to its window unsettled, each Pending waited for),
// then with the bare call again. Before each phase the jobs fail anew and
// are captured through the driver's source, not timed: a retry checks the
// incarnation the capture read.
func benchJobStoreReplay(ctx context.Context, cfg *config, rep *report, kind jobStoreKind) error {
	scenario := kind.name + "-replay"
	n := cfg.JobStoreN
	cfg.logf("%s: seeding %d failed jobs (not timed)", scenario, n)
	st, err := kind.open(ctx, cfg, n)
	if err != nil {
		return err
	}
	defer st.close()
	retrier, err := st.openRetrier(ctx)
	if err != nil {
		return err
	}
	defer retrier.Close()

	var phases []jobStorePhase
	request := int64(0)
	// measure times rounds of fn until jobStoreMinPhase has passed, each
	// on jobs failed anew and captured, which is not timed.
	measure := func(name string, fn func(jobs []replay.JobRef) error) (time.Duration, int, error) {
		cfg.logf("%s: %s of %d jobs, again until %s have passed", scenario, name, n, jobStoreMinPhase)
		var (
			d      time.Duration
			use    = cpuUse{Groups: map[string]float64{}}
			rounds int
		)
		for rounds == 0 || (!cfg.Smoke && d < jobStoreMinPhase) {
			if err := st.fail(ctx); err != nil {
				return 0, 0, fmt.Errorf("fail the jobs again before %s: %w", name, err)
			}
			jobs, err := captureJobs(ctx, st, n)
			if err != nil {
				return 0, 0, fmt.Errorf("capture the jobs before %s: %w", name, err)
			}
			request++
			mon := startCPU()
			start := time.Now()
			err = fn(jobs)
			d += time.Since(start)
			use.add(mon.Stop())
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", name, err)
			}
			got, err := st.retried(ctx)
			if err != nil {
				return 0, 0, fmt.Errorf("count the jobs retried by %s: %w", name, err)
			}
			if got != n {
				return 0, 0, fmt.Errorf("after %s, %d of %d jobs are runnable again", name, got, n)
			}
			rounds++
		}
		phases = append(phases, jobStorePhase{fmt.Sprintf("%s (%d rounds)", name, rounds), d, use, rounds * n})
		cfg.logf("%s: %s: %d rounds of %d jobs in %s = %.0f jobs/s", scenario, name, rounds, n, d.Round(time.Millisecond),
			float64(rounds*n)/d.Seconds())
		return d, rounds * n, nil
	}
	bareName := fmt.Sprintf("baseline %s, %d at once", st.bareRetryName, st.retrierConcurrency)
	bare := func(jobs []replay.JobRef) error { return st.bareRetry(ctx, jobs) }
	bare1, retried1, err := measure(bareName, bare)
	if err != nil {
		return err
	}
	subj, retried, err := measure("subject retrier", func(jobs []replay.JobRef) error {
		return publishRetries(ctx, retrier, st, request, jobs)
	})
	if err != nil {
		return err
	}
	bare2, retried2, err := measure(bareName+" again", bare)
	if err != nil {
		return err
	}
	baseRate := float64(retried1+retried2) / (bare1 + bare2).Seconds()
	subjRate := float64(retried) / subj.Seconds()
	rep.throughputInfo(fmt.Sprintf("%d %s %s: the retrier vs %s", kind.line, scenario, count(n), st.bareRetryName), baseRate, subjRate, "jobs/s")
	jobStoreNotes(rep, fmt.Sprintf("%d %s", kind.line, scenario), scenario, phases)
	rep.note("%s: the retrier has %d retries in flight of the runner's window of %d, the bare calls as many", scenario,
		st.retrierConcurrency, jobRetryWindow)
	return nil
}

// captureJobs reads n failed jobs through the store's source, as a capture
// does, and returns the jobs the letters name: what the runner gives the
// retrier.
func captureJobs(ctx context.Context, st *jobStore, n int) ([]replay.JobRef, error) {
	src, err := st.openSource(ctx, n)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	jobs := make([]replay.JobRef, 0, n)
	timeout := time.After(time.Minute)
	for len(jobs) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				return nil, fmt.Errorf("the source ended after %d of %d jobs", len(jobs), n)
			}
			jobs = append(jobs, replay.JobRef{ID: d.Message.Native[deadletter.NativeJobID], Incarnation: d.Message.Native[deadletter.NativeIncarnation]})
			if err := src.Acknowledge(d.Tag); err != nil {
				return nil, err
			}
		case <-timeout:
			return nil, fmt.Errorf("the source delivered %d of %d jobs in a minute", len(jobs), n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return jobs, nil
}

// publishRetries publishes a retry of each job to b as replay.Runner does
// for request (its marks, item numbers from 1), with up to the runner's
// window unsettled, and waits for every outcome, each of which must be a
// retry.
func publishRetries(ctx context.Context, b replay.Broker, st *jobStore, request int64, jobs []replay.JobRef) error {
	replayedAt := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	inFlight := make(chan replay.Pending, jobRetryWindow)
	var (
		settled sync.WaitGroup
		failed  []error
	)
	settled.Add(1)
	go func() {
		defer settled.Done()
		for p := range inFlight {
			<-p.Done()
			if err := p.Outcome(); err != nil && len(failed) < 3 {
				failed = append(failed, err)
			}
		}
	}()
	var err error
	for i, job := range jobs {
		item := int64(i + 1)
		m := replay.Message{Item: item, RoutingKey: st.queue, System: st.system, Job: job, Headers: map[string]any{
			replay.HeaderReplayRequest: request, replay.HeaderReplayCount: int64(1), replay.HeaderReplayItem: item,
			replay.HeaderReplayedBy: "bench", replay.HeaderApprovedBy: "bench-approver", replay.HeaderReplayedAt: replayedAt,
		}}
		var p replay.Pending
		if p, err = b.Publish(ctx, m); err != nil {
			break
		}
		inFlight <- p
	}
	close(inFlight)
	settled.Wait()
	return errors.Join(append([]error{err}, failed...)...)
}

// jobStoreNotes says where the CPU went in each phase, per job, and warns
// when other work took enough of the machine to make the ratio unreliable.
// phases are baseline, subject, baseline.
func jobStoreNotes(rep *report, line, scenario string, phases []jobStorePhase) {
	bare := (phases[0].cpu.known() + phases[2].cpu.known()) / float64(phases[0].items+phases[2].items)
	if subject := phases[1]; subject.items > 0 {
		rep.cpuPerItem(line+" CPU a job: all together vs the bare client's", bare*float64(subject.items), subject.cpu.known(), subject.items, 0)
	}
	rep.note("%s: the subject took %.1f µs of CPU a job, the processes it involves together, the baseline %.1f µs", scenario,
		1e6*phases[1].cpu.known()/float64(phases[1].items), 1e6*bare)
	for _, p := range phases {
		rep.note("%s %s: %s in %s; per job %s", scenario, p.name, p.cpu, fmtDuration(p.wall), p.cpu.PerItem(p.items))
		if share := p.cpu.OtherShare(p.wall); share > 0.15 {
			rep.note("WARNING: during %s %s, other processes used %.0f%% of the machine's CPU: the %s ratio is "+
				"unreliable in this run; rerun on a quieter machine", scenario, p.name, 100*share, scenario)
		}
	}
}

// concurrently calls fn for each job, width at once, as a retrier with
// that concurrency works its queue, and returns the first errors.
func concurrently(ctx context.Context, jobs []replay.JobRef, width int, fn func(context.Context, replay.JobRef) error) error {
	work := make(chan replay.JobRef)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				if err := fn(ctx, job); err != nil {
					mu.Lock()
					if len(errs) < 3 {
						errs = append(errs, fmt.Errorf("job %s: %w", job.ID, err))
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, job := range jobs {
		select {
		case work <- job:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}
