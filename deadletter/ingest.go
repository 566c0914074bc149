package deadletter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/store"
)

// Delivery is one message received from a dead-letter queue together with the
// tag that acknowledges it.
type Delivery struct {
	Message Message
	Tag     uint64
}

// Source is a consumer on one dead-letter queue, or on a job store's failed
// jobs; each driver provides its own.
type Source interface {
	// Deliveries yields messages until the consumer stops, then closes.
	Deliveries() <-chan Delivery
	// Acknowledge settles every delivery up to and including tag, once
	// its letters are stored: the source may let them go (a broker deletes
	// them; a job store's capture moves past them, leaving them in place).
	Acknowledge(tag uint64) error
	// Ready reports how many messages wait in the queue, not counting those
	// already handed to a consumer.
	Ready() (int, error)
}

// DeliveryStopper is a Source that can end its deliveries for certain: a
// push consumer whose broker may have sent letters that are still on
// their way through the client. StopDeliveries tells the broker to send
// no more and returns once every letter already sent is in Deliveries,
// which then closes; acknowledging them still works.
//
// Without it, an ingest that found the queue empty could not tell a
// letter still on its way from no letter: Ready counts only the letters
// not yet handed to a consumer, and a process short of CPU for a linger
// ended with delivered letters unread (left unacknowledged, so back in
// the queue, but the run stopped short of emptying it).
type DeliveryStopper interface {
	StopDeliveries() error
}

// IngestOptions tunes one ingest run.
type IngestOptions struct {
	// Actor is recorded on the audit rows.
	Actor string
	// Queue names the dead-letter queue, for the audit rows.
	Queue string
	// Connection names the connection the queue is on, which every letter
	// records; empty: the archive's rule (a job store's letter's is its
	// queue name's, otherwise its system's name).
	Connection string
	// Batch is the most letters committed in one transaction (default 500).
	Batch int
	// BatchBytes caps a batch's payload bytes, so large letters do not make a
	// batch huge (default 16 MiB).
	BatchBytes int
	// Linger is how long a partly filled batch waits for more letters before it
	// is committed (default 100ms).
	Linger time.Duration
	// Writers is how many batches are stored at once (default 2): while one
	// transaction waits for PostgreSQL, the next is already on its way.
	Writers int
	// Follow keeps ingesting until ctx is cancelled; otherwise Ingest returns
	// once the queue is empty.
	Follow bool
	// Classifier maps letters to reason categories (default DefaultClassifier).
	Classifier *Classifier
	// Progress, when set, is called after every committed batch.
	Progress func(IngestStats)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// IngestStats counts what an ingest run did. Its JSON carries Elapsed in
// seconds, as elapsed_seconds.
type IngestStats struct {
	Received   int64         `json:"received"`
	Stored     int64         `json:"stored"`
	Duplicates int64         `json:"duplicates"`
	Batches    int64         `json:"batches"`
	Elapsed    time.Duration `json:"-"`
}

// Rate is letters received per second over the run so far.
func (s IngestStats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Received) / s.Elapsed.Seconds()
}

// ErrSourceLost is the source's consumer gone from under an ingest: its
// connection lost, or its queue deleted. What was received and not
// committed was never acknowledged, so the broker redelivers it.
var ErrSourceLost = errors.New("the queue's consumer ended (connection lost or queue deleted)")

// StoreError reports that PostgreSQL refused or lost a batch. Nothing of that
// batch was acknowledged: its messages stay in the queue.
type StoreError struct {
	Letters int
	Err     error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("storing a batch of %d letters failed, so none of them was acknowledged and all stay in the queue: %v", e.Letters, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }

// Ingest captures letters from src into the archive. A batch is acknowledged
// only after its transaction committed, with one multiple-ack; a crash at any
// point leaves every letter either committed or still in the queue, and the
// redelivered copy of a committed letter is skipped by its fingerprint. When
// ctx is cancelled the batch being written is finished (committed and acked)
// and the one being collected is left unacknowledged for the broker to
// redeliver.
func Ingest(ctx context.Context, pool *pgxpool.Pool, src Source, opts IngestOptions) (IngestStats, error) {
	opts = withIngestDefaults(opts)
	start := opts.Now()
	var stats IngestStats

	// Three stages overlap: the collector receives and parses, Writers
	// batches are stored concurrently, and this goroutine acknowledges them
	// strictly in the order they were received, so that one multiple-ack
	// never covers a batch that has not committed.
	batches := make(chan batch, opts.Writers)
	collectErr := make(chan error, 1)
	// A failed batch stops the collector too: otherwise, with the prefetch
	// window full of unacknowledged letters, it would wait for ever.
	collectCtx, stopCollecting := context.WithCancel(ctx)
	defer stopCollecting()
	go func() {
		collectErr <- collect(collectCtx, src, opts, batches)
		close(batches)
	}()

	written := make(chan writtenBatch, opts.Writers)
	// failed is set once a batch could not be stored or acknowledged.
	var failed atomic.Bool
	var writers sync.WaitGroup
	for range opts.Writers {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for b := range batches {
				if failed.Load() {
					// Never acknowledged after the failure, so not worth
					// another wait on a server that just failed.
					written <- writtenBatch{batch: b, err: errNotWritten}
					continue
				}
				res, err := writeBatch(pool, b, opts)
				written <- writtenBatch{batch: b, res: res, err: err}
			}
		}()
	}
	go func() {
		writers.Wait()
		close(written)
	}()

	var writeErr error
	done := map[int64]writtenBatch{}
	var next int64
	for w := range written {
		done[w.seq] = w
		for {
			w, ok := done[next]
			if !ok {
				break
			}
			delete(done, next)
			next++
			if writeErr != nil {
				continue // nothing after a failure is acked; stored copies are redelivered and skipped
			}
			if w.err != nil {
				writeErr = w.err
				failed.Store(true)
				stopCollecting()
				continue
			}
			// The batch is committed whether or not its acknowledgement
			// goes through: it counts.
			stats.Received += int64(len(w.letters))
			stats.Stored += int64(w.res.Stored)
			stats.Duplicates += int64(w.res.Duplicates)
			stats.Batches++
			if err := src.Acknowledge(w.lastTag); err != nil {
				// Committed but not acked: the broker redelivers and the
				// fingerprint makes the copies no-ops.
				writeErr = fmt.Errorf("%w: acknowledging %d stored letters failed (they will be redelivered and skipped as duplicates): %w", ErrSourceLost, len(w.letters), err)
				failed.Store(true)
				stopCollecting()
				continue
			}
			stats.Elapsed = opts.Now().Sub(start)
			if opts.Progress != nil {
				opts.Progress(stats)
			}
		}
	}
	stats.Elapsed = opts.Now().Sub(start)
	err := errors.Join(writeErr, <-collectErr)

	summary := audit.Entry{Actor: opts.Actor, Action: "dlq.ingest", Target: "queue:" + opts.Queue,
		Details: map[string]any{"received": stats.Received, "stored": stats.Stored, "duplicates": stats.Duplicates,
			"batches": stats.Batches, "follow": opts.Follow}}
	if err != nil {
		summary.Outcome = audit.Failed
		summary.Details.(map[string]any)["error"] = audit.ErrorText(err)
	}
	auditCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if auditErr := audit.Record(auditCtx, pool, summary); auditErr != nil && err == nil {
		err = auditErr
	}
	return stats, err
}

// batch is letters parsed by the collector, numbered in receive order.
type batch struct {
	seq     int64
	letters []Letter
	lastTag uint64
}

type writtenBatch struct {
	batch
	res StoreResult
	err error
}

func withIngestDefaults(opts IngestOptions) IngestOptions {
	if opts.Batch <= 0 {
		opts.Batch = 500
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 16 << 20
	}
	if opts.Writers <= 0 {
		opts.Writers = 2
	}
	if opts.Linger <= 0 {
		opts.Linger = 100 * time.Millisecond
	}
	if opts.Classifier == nil {
		opts.Classifier = DefaultClassifier()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

// collect groups deliveries into batches. Without Follow it stops once the
// queue is empty and everything received has been handed on: a source
// that is a DeliveryStopper is stopped then, and read to its end.
func collect(ctx context.Context, src Source, opts IngestOptions, out chan<- batch) error {
	deliveries := src.Deliveries()
	var current batch
	var bytes int
	// stopped: the source was told to stop, and its deliveries closing is
	// the end of the run rather than a lost consumer.
	stopped := false
	linger := time.NewTimer(opts.Linger)
	defer linger.Stop()

	flush := func() bool {
		if len(current.letters) == 0 {
			return true
		}
		select {
		case out <- current:
			current = batch{seq: current.seq + 1}
			bytes = 0
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil // the partial batch stays unacked and is redelivered
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				if !flush() {
					return nil
				}
				if stopped {
					return nil
				}
				if lost, ok := src.(interface{ Err() error }); ok && lost.Err() != nil {
					return fmt.Errorf("%w: %w; letters not yet stored stay in the queue", ErrSourceLost, lost.Err())
				}
				return fmt.Errorf("%w; letters not yet stored stay in the queue", ErrSourceLost)
			}
			// Parsing here, while the writers wait on PostgreSQL, keeps the
			// CPU work off the commit path.
			current.letters = append(current.letters, Parse(d.Message, opts.Classifier, opts.Now()))
			current.lastTag = d.Tag
			bytes += len(d.Message.Body)
			if len(current.letters) >= opts.Batch || bytes >= opts.BatchBytes {
				if !flush() {
					return nil
				}
				linger.Reset(opts.Linger)
			}
		case <-linger.C:
			if !flush() {
				return nil
			}
			linger.Reset(opts.Linger)
			if opts.Follow || stopped {
				continue
			}
			ready, err := src.Ready()
			if err != nil {
				// The queue is asked on the consumer's connection: failing,
				// the consumer is lost with it.
				return fmt.Errorf("%w: checking whether the queue is empty: %w; letters not yet stored stay in the queue", ErrSourceLost, err)
			}
			if ready == 0 && len(deliveries) == 0 {
				stopper, ok := src.(DeliveryStopper)
				if !ok {
					return nil
				}
				if err := stopper.StopDeliveries(); err != nil {
					return fmt.Errorf("%w: stopping the consumer at the end of the queue: %w; letters not yet stored stay in the queue", ErrSourceLost, err)
				}
				stopped = true
			}
		}
	}
}

// writeBatch stores one batch and its audit row in one transaction. It does
// not use the caller's context: once a batch is being written it is
// finished, so that a signal never leaves it half done.
func writeBatch(pool *pgxpool.Pool, b batch, opts IngestOptions) (StoreResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One statement: the letters and their batch's audit row commit
	// together, inside the database function. Two batches written at once
	// that hold copies of the same letters in opposite orders (redeliveries
	// after a crash) can deadlock on the fingerprint index; PostgreSQL then
	// rolls one back whole, and writing it again is safe: nothing of it was
	// stored or acknowledged.
	var res StoreResult
	var err error
	for attempt := 1; ; attempt++ {
		if opts.Connection != "" {
			for i := range b.letters {
				b.letters[i].Connection = opts.Connection
			}
		}
		res, err = InsertAs(ctx, pool, opts.Actor, opts.Queue, b.letters)
		if err == nil || attempt == maxBatchAttempts || !store.RolledBackForAnother(err) {
			break
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
	if err != nil {
		return StoreResult{}, &StoreError{Letters: len(b.letters), Err: err}
	}
	return res, nil
}

// errNotWritten marks a batch left unwritten because one before it failed;
// it stays in the queue like the failed one.
var errNotWritten = errors.New("not written: an earlier batch failed")

// maxBatchAttempts bounds how often a batch that lost a deadlock is
// written again.
const maxBatchAttempts = 5
