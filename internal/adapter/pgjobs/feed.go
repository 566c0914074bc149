package pgjobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Feed is the delivering half of a source that polls a job table: it
// runs the source's rounds until it is closed or a round fails, hands
// letters on with their delivery tags, and holds at most a prefetch of
// them not yet acknowledged. A Poller runs on one; a source that walks
// its table otherwise (jobtable's) may use one of its own.
type Feed struct {
	deliveries chan deadletter.Delivery
	// room bounds the deliveries not yet acknowledged (the prefetch).
	room      chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	done      sync.WaitGroup
	closeOnce sync.Once

	mu    sync.Mutex
	next  uint64 // the last tag handed out
	acked uint64 // every tag up to this one is acknowledged
	err   error
}

// NewFeed is a feed that holds at most prefetch deliveries not yet
// acknowledged, handing them on through a buffer of a page (at most 100).
// It delivers nothing until Start.
func NewFeed(prefetch, page int) *Feed {
	ctx, cancel := context.WithCancel(context.Background())
	return &Feed{deliveries: make(chan deadletter.Delivery, min(page, 100)), room: make(chan struct{}, prefetch),
		ctx: ctx, cancel: cancel}
}

// Start runs round in a goroutine of its own, and again poll after each
// time it returns, until the feed is closed or round fails: its error
// then ends the deliveries (Err). round reads through Read, which the
// feed's closing cuts short, and delivers through Reserve and Send.
func (f *Feed) Start(poll time.Duration, round func() error) {
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		defer close(f.deliveries)
		for {
			if err := round(); err != nil {
				if f.ctx.Err() == nil {
					f.mu.Lock()
					f.err = err
					f.mu.Unlock()
				}
				return
			}
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(poll):
			}
		}
	}()
}

// Context ends when the feed is closed: a source's own statements outside
// Read (its Ready) end with it.
func (f *Feed) Context() context.Context { return f.ctx }

// Deliveries implements deadletter.Source. They end when the feed is
// closed, or when a round failed (see Err).
func (f *Feed) Deliveries() <-chan deadletter.Delivery { return f.deliveries }

// Err says why the deliveries ended when a round failed them: the
// database stayed lost for longer than the source's Reconnect, or
// answered what no retry changes. Nil when they were closed.
func (f *Feed) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Reserve waits for room in the prefetch for one more delivery; false
// when the feed was closed first. A source marks what it delivers between
// Reserve and Send: a consumer that has a delivery may ask the source's
// Ready at once, which must not count it again.
func (f *Feed) Reserve() bool {
	select {
	case f.room <- struct{}{}:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// Send hands m on with the next tag, in the room Reserve made; false when
// the feed was closed before the hand-off, when the source takes its mark
// back.
func (f *Feed) Send(m deadletter.Message) bool {
	f.mu.Lock()
	f.next++
	tag := f.next
	f.mu.Unlock()
	select {
	case f.deliveries <- deadletter.Delivery{Message: m, Tag: tag}:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// Acknowledge implements deadletter.Source. A job store's table is not
// changed: its jobs stay failed, and acknowledging them only makes room
// for more deliveries.
func (f *Feed) Acknowledge(tag uint64) error {
	f.mu.Lock()
	tag = min(tag, f.next)
	n := 0
	if tag > f.acked {
		n = int(tag - f.acked)
		f.acked = tag
	}
	f.mu.Unlock()
	for range n {
		<-f.room
	}
	return nil
}

// Read runs read, trying a lost database again with backoff for up to
// reconnect: a restart of a job store's PostgreSQL is a pause, not the
// end of a capture. An answer that no retry changes (no such table or
// schema, no privilege) ends it at once, as does the feed's closing. what
// names the read in its errors: "read River queue river://orders/expiry".
func (f *Feed) Read(reconnect time.Duration, what string, read func(ctx context.Context) error) error {
	var lostSince time.Time
	backoff := 100 * time.Millisecond
	for {
		err := read(f.ctx)
		if err == nil {
			return nil
		}
		if f.ctx.Err() != nil {
			return f.ctx.Err()
		}
		if lastingError(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		}
		if time.Since(lostSince) > reconnect {
			return fmt.Errorf("%s: the database was lost for over %s: %w", what, reconnect, err)
		}
		select {
		case <-f.ctx.Done():
			return f.ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// lastingError says whether err is PostgreSQL's answer about the query or
// the login rather than about the server's life: syntax or access rule
// violations (class 42), authorisation (class 28) and a missing schema
// (3F) stay as they are however often the read is tried.
func lastingError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "3F"))
}

// Close stops the rounds and waits for the one under way to end; the
// deliveries end. Closing again does nothing.
func (f *Feed) Close() {
	f.closeOnce.Do(func() {
		f.cancel()
		f.done.Wait()
	})
}
