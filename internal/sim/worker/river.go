package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// RiverKind is the River kind of the contract's expiry job.
const RiverKind = "reservation_expiry"

// riverQueueName is River's own rule for a queue name (river's
// validateQueueName, v0.51.2), checked here so that a flag names the
// problem before anything is dialed.
var riverQueueName = regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`)

// ValidRiverQueue says why River would refuse queue as a queue name, or
// returns nil.
func ValidRiverQueue(queue string) error {
	if len(queue) > 128 || !riverQueueName.MatchString(queue) {
		return fmt.Errorf("queue name %q is not one River accepts: use lowercase letters and digits, separated by single - or _ (at most 128)", queue)
	}
	return nil
}

// RiverArgs is an expiry job as River args. It carries the contract's
// body as it is, both ways: a producer's job goes into river_job.args
// unchanged, and a worker decodes what is there with DecodeJob, so a
// malformed body is classified as on RabbitMQ rather than refused by
// River's own decoding before the worker sees it.
type RiverArgs struct {
	Body json.RawMessage
}

// Kind is RiverKind.
func (RiverArgs) Kind() string { return RiverKind }

// MarshalJSON is the body.
func (a RiverArgs) MarshalJSON() ([]byte, error) {
	if len(a.Body) == 0 {
		return []byte("null"), nil
	}
	return a.Body, nil
}

// UnmarshalJSON keeps b as the body.
func (a *RiverArgs) UnmarshalJSON(b []byte) error {
	a.Body = append(a.Body[:0], b...)
	return nil
}

// RiverDeps is what RunRiver works with.
type RiverDeps struct {
	// Pool holds the reservations schema.
	Pool *pgxpool.Pool
	// River reaches River's database, where the queue's jobs are.
	River *pgxpool.Pool
	// Queue is River's queue name.
	Queue string
	// Concurrency is how many jobs are worked at once (default 4).
	Concurrency int
	// Out receives a line per job; nil discards them.
	Out io.Writer
}

// riverStopTimeout bounds the wait, once asked to stop, for the jobs
// being worked: River completes them rather than leaving them running
// for its rescuer to find an hour later.
const riverStopTimeout = 15 * time.Second

// RunRiver is the reference worker on a River queue, until ctx ends: a
// River client whose worker expires each job's reservation exactly once
// (ExpireOnce), in River's place of an ack: the job completes only after
// the expiry committed. A job that comes early is snoozed until its
// reservation's deadline, spending no attempt; a permanent failure
// (malformed, not found, a version conflict) cancels the job, River's way
// of saying no retry can help, and a transient one is left to River's
// retry policy and the job's max_attempts, after which River discards it.
func RunRiver(ctx context.Context, deps RiverDeps) error {
	if err := ValidRiverQueue(deps.Queue); err != nil {
		return err
	}
	out := &riverLines{w: deps.Out}
	if out.w == nil {
		out.w = io.Discard
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{pool: deps.Pool, out: out}); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	concurrency := deps.Concurrency
	if concurrency < 1 {
		concurrency = 4
	}
	client, err := river.NewClient(riverpgxv5.New(deps.River), &river.Config{
		Queues:  map[string]river.QueueConfig{deps.Queue: {MaxWorkers: concurrency}},
		Workers: workers,
		// A replayed job is available at once; the default second of
		// polling would make every replay in the demo wait for it.
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return fmt.Errorf("worker: a River client on queue %s: %w", deps.Queue, err)
	}
	// River takes the end of Start's context for an abrupt stop, which
	// cancels the jobs being worked; the end of ctx asks for a graceful one.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("worker: start the River client: %w", err)
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), riverStopTimeout)
	defer cancel()
	if err := client.Stop(stop); err != nil {
		hard, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), riverStopTimeout)
		defer cancelHard()
		_ = client.StopAndCancel(hard)
		return fmt.Errorf("worker: the jobs being worked did not finish within %s of the stop, and were cancelled: %w", riverStopTimeout, err)
	}
	return nil
}

// riverWorker is the River worker of RiverKind.
type riverWorker struct {
	river.WorkerDefaults[RiverArgs]
	pool *pgxpool.Pool
	out  *riverLines
}

func (w *riverWorker) Work(ctx context.Context, j *river.Job[RiverArgs]) error {
	job, err := DecodeJob(j.Args.Body)
	if err != nil {
		w.out.printf("cancelled River job %d: %v", j.ID, err)
		return river.JobCancel(err)
	}
	outcome, err := ExpireOnce(ctx, w.pool, job)
	var notDue *NotDueError
	var jobErr *JobError
	switch {
	case errors.As(err, &notDue):
		w.out.printf("snoozed %s (River job %d) for %s: not due yet", job.ReservationID, j.ID, notDue.Wait.Round(time.Millisecond))
		return river.JobSnooze(notDue.Wait)
	case errors.As(err, &jobErr) && jobErr.Permanent:
		w.out.printf("cancelled %s (River job %d): %v", job.ReservationID, j.ID, err)
		return river.JobCancel(err)
	case err != nil:
		w.out.printf("failed %s (River job %d, attempt %d): %v", job.ReservationID, j.ID, j.Attempt, err)
		return err
	}
	w.out.printf("%s %s (River job %d)", outcome, job.ReservationID, j.ID)
	return nil
}

// riverLines serialises lines written from River's worker goroutines.
type riverLines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *riverLines) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}
