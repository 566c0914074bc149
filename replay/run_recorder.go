package replay

import (
	"context"
	"fmt"
	"time"
)

// outcome is one broker answer for the recorder.
type outcome struct {
	id      int64
	ordinal int
	failed  bool
	// skipped: the job store no longer holds the failed job the letter
	// captured (JobMovedOnError); why says what it holds.
	skipped bool
	why     string
	// again is an answer for an item published again, one an earlier run
	// left in doubt: written within urgentFlush rather than at the next
	// tick, since each run that dies before it is written spends one more
	// of the item's sends (PublishBound).
	again bool
}

// urgentFlush is how soon an answer for an item published again is
// written. Such items go out first in a resumed run, a few hundred at most,
// so the extra commits are few; left to the 100 ms tick, a run killed
// again and again soon after it starts would leave the same items in doubt
// each time, and fail them.
const urgentFlush = 10 * time.Millisecond

// recorder writes broker answers in batches on its own goroutine: items
// confirmed (and their letters replayed) or failed, in one transaction per
// batch. An item is written confirmed only from an ack.
type recorder struct {
	r       *Runner
	request int64
	in      chan outcome
	flush   chan chan error
	done    chan struct{}
	// failed is closed at the first write error; err is that error, set
	// before failed closes and never changed after.
	failed chan struct{}
	err    error
	// unrecorded holds answers that could not be written once a write
	// failed; read only after done is closed.
	unrecorded []outcome
}

func newRecorder(r *Runner, request int64) *recorder {
	rec := &recorder{r: r, request: request, in: make(chan outcome, 8192), flush: make(chan chan error),
		done: make(chan struct{}), failed: make(chan struct{})}
	go rec.loop()
	return rec
}

func (rec *recorder) loop() {
	defer close(rec.done)
	const maxBatch = 1000
	var buf []outcome
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// urgent fires urgentFlush after the first answer for an item published
	// again that buf holds; nil while it holds none.
	var urgent <-chan time.Time
	for {
		select {
		case o, ok := <-rec.in:
			if !ok {
				rec.writeOut(buf)
				return
			}
			if rec.err != nil {
				rec.unrecorded = append(rec.unrecorded, o)
				continue
			}
			buf = append(buf, o)
			if o.again && urgent == nil {
				urgent = time.After(urgentFlush)
			}
			if len(buf) >= maxBatch {
				buf, urgent = rec.writeOut(buf), nil
			}
		case <-urgent:
			buf, urgent = rec.writeOut(buf), nil
		case <-tick.C:
			buf, urgent = rec.writeOut(buf), nil
		case reply := <-rec.flush:
			buf, urgent = rec.writeOut(rec.takeQueued(buf)), nil
			if rec.err != nil {
				reply <- fmt.Errorf("record broker answers: %w", rec.err)
			} else {
				reply <- nil
			}
		}
	}
}

// writeOut writes buf, or once a write failed keeps it as unrecorded, and
// returns buf emptied for reuse.
func (rec *recorder) writeOut(buf []outcome) []outcome {
	if len(buf) == 0 {
		return buf
	}
	if rec.err != nil {
		rec.unrecorded = append(rec.unrecorded, buf...)
		return buf[:0]
	}
	if err := rec.write(buf); err != nil {
		rec.err = err
		close(rec.failed)
		rec.unrecorded = append(rec.unrecorded, buf...)
	}
	return buf[:0]
}

// takeQueued adds to buf every answer already sent, without waiting:
// everything sent before a flush request is in rec.in ahead of nothing.
func (rec *recorder) takeQueued(buf []outcome) []outcome {
	for {
		select {
		case o, ok := <-rec.in:
			if !ok {
				return buf
			}
			buf = append(buf, o)
		default:
			return buf
		}
	}
}

func (rec *recorder) write(buf []outcome) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var confirmed, failed []int64
	var whys []string
	skips := itemMarks{}
	lo, hi := buf[0].ordinal, buf[0].ordinal
	for _, o := range buf {
		lo, hi = min(lo, o.ordinal), max(hi, o.ordinal)
		switch {
		case o.skipped:
			skips.skip, skips.skipWhy = append(skips.skip, o.id), append(skips.skipWhy, o.why)
		case o.failed:
			failed, whys = append(failed, o.id), append(whys, o.why)
		default:
			confirmed = append(confirmed, o.id)
		}
	}
	if len(skips.skip) > 0 {
		// Rare (a job someone else retried or removed), so a statement of
		// their own; a request no longer running moves nothing, and the
		// items go out again, and are skipped again, on resume.
		skips.lo, skips.hi = lo, hi
		if _, err := rec.r.tables().ItemsMark(ctx, rec.request, skips); err != nil {
			return err
		}
	}
	// The batch's ordinal range lets the database find its items by index
	// (see ItemsRecord).
	return rec.r.tables().ItemsRecord(ctx, rec.request, lo, hi, confirmed, failed, whys)
}

// sync writes everything sent so far and reports the first write error.
// On a closed recorder it waits for nothing: close wrote what it was sent
// (the outcome watcher, carried over a failover, may still ask).
func (rec *recorder) sync() error {
	reply := make(chan error, 1)
	select {
	case rec.flush <- reply:
		return <-reply
	case <-rec.failed:
		return rec.err
	case <-rec.done:
		return rec.err
	}
}

// close writes what is left and stops the recorder.
func (rec *recorder) close() error {
	close(rec.in)
	<-rec.done
	return rec.err
}
