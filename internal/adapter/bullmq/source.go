package bullmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/deadletter"
)

// SourceOptions tunes a Source.
type SourceOptions struct {
	// Prefetch is the most jobs delivered and not yet acknowledged
	// (default 1000).
	Prefetch int
	// Page is how many failed jobs one read takes: one ZRANGE and one
	// pipeline of as many HGETALLs (default 500).
	Page int
	// Poll is how long the source waits, once it has read everything,
	// before it looks for newer failures (default 1 s).
	Poll time.Duration
	// Window is how far behind the newest failure it has read each poll
	// reads again (default 30 s). A job's finishedOn is its worker's clock:
	// a worker whose clock is behind, or a failure that reaches Redis
	// late, adds a job behind the cursor, which a window as wide as the
	// worst skew still finds. What the source already delivered there is
	// not delivered again.
	Window time.Duration
	// LostAfter is how long Redis may fail every read before the source
	// gives up and ends its deliveries with Err (default 1 min). A restart
	// or failover shorter than that is waited out.
	LostAfter time.Duration
}

func (o SourceOptions) withDefaults() SourceOptions {
	if o.Prefetch <= 0 {
		o.Prefetch = 1000
	}
	if o.Page <= 0 {
		o.Page = 500
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Window <= 0 {
		o.Window = 30 * time.Second
	}
	if o.LostAfter <= 0 {
		o.LostAfter = time.Minute
	}
	return o
}

// Source captures the failed jobs of one BullMQ queue for
// deadletter.Ingest. It only reads: ZRANGE BYSCORE on the failed set, in
// BullMQ's order (finishedOn, then job id as Redis orders members of equal
// score), and HGETALL of each job, pipelined. Redis is never changed, so
// acknowledging a delivery only frees room in the prefetch; a capture run
// again reads the same jobs, and the archive stores each once by its id
// and incarnation. It keeps reading newer failures until closed; an ingest
// without Follow ends when Ready says none is left.
type Source struct {
	client redis.UniversalClient
	ref    Ref
	keys   keys
	opts   SourceOptions

	deliveries chan deadletter.Delivery
	// room bounds the deliveries not yet acknowledged (the prefetch).
	room   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu    sync.Mutex
	next  uint64 // the last tag handed out
	acked uint64 // the highest tag acknowledged
	// cursor is the newest finishedOn delivered or skipped: noCursor
	// before the first.
	cursor int64
	// accounted holds, by job id, the score at which the source delivered
	// the job or decided to skip it, for those within the window behind
	// the cursor: they are what a poll reads again and must not deliver
	// twice, and what Ready must not count.
	accounted map[string]int64
	err       error
	version   string
	closeOnce sync.Once
}

// OpenSource starts capturing ref's failed jobs through client, which the
// caller keeps and closes after the source. It refuses a queue whose meta
// names a BullMQ version the driver does not know
// (*UnsupportedVersionError), and one with no meta under ref's prefix
// (*QueueNotFoundError, which names the prefixes that hold a queue of that
// name).
func OpenSource(ctx context.Context, client redis.UniversalClient, ref Ref, opts SourceOptions) (*Source, error) {
	version, err := Version(ctx, client, ref)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Source{client: client, ref: ref, keys: keysOf(ref), opts: opts,
		deliveries: make(chan deadletter.Delivery, min(opts.Page, opts.Prefetch)),
		room:       make(chan struct{}, opts.Prefetch),
		ctx:        runCtx, cancel: cancel, cursor: noCursor, accounted: make(map[string]int64), version: version}
	s.done.Add(1)
	go s.run()
	return s, nil
}

// QueueName is the queue's name without credentials, as letters and the
// audit trail name it (Ref.Name).
func (s *Source) QueueName() string { return s.ref.Name() }

// Deliveries implements deadletter.Source.
func (s *Source) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Err says why the deliveries ended when Redis failed them for longer
// than LostAfter or the queue's version changed under the capture; nil
// when they were closed.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Acknowledge implements deadletter.Source. Capture leaves the job in
// Redis, so acknowledging only makes room for more deliveries.
func (s *Source) Acknowledge(tag uint64) error {
	s.mu.Lock()
	n := 0
	if tag > s.acked {
		tag = min(tag, s.next)
		n = int(tag - s.acked)
		s.acked = tag
	}
	s.mu.Unlock()
	for range n {
		<-s.room
	}
	return nil
}

// Ready implements deadletter.Source: the jobs in the failed set that this
// source has neither delivered nor skipped, counting those newer than its
// cursor (ZCOUNT) and those within the window behind it. A job that fails
// with a finishedOn further behind than the window is not counted, and not
// delivered by a poll: the next capture takes it.
func (s *Source) Ready() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	cursor := s.cursor
	s.mu.Unlock()
	failed := s.keys.of("failed")
	pipe := s.client.Pipeline()
	newer := pipe.ZCount(ctx, failed, "("+strconv.FormatInt(cursor, 10), "+inf")
	behind := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: failed, ByScore: true,
		Start: strconv.FormatInt(s.windowStart(cursor), 10), Stop: strconv.FormatInt(cursor, 10)})
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("count the failed jobs of %s: %w", s.ref.Name(), err)
	}
	n := int(newer.Val())
	s.mu.Lock()
	for _, z := range behind.Val() {
		if at, ok := s.accounted[z.Member.(string)]; !ok || at != int64(z.Score) {
			n++
		}
	}
	s.mu.Unlock()
	return n, nil
}

// noCursor is a cursor before every score: nothing is accounted for yet.
const noCursor = -1 << 62

// windowStart is the oldest score a poll reads again.
func (s *Source) windowStart(cursor int64) int64 {
	if cursor == noCursor {
		return cursor
	}
	return cursor - s.opts.Window.Milliseconds()
}

// Close stops reading. The client stays open: it is the caller's. Closing
// again does nothing.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.done.Wait()
	})
	return nil
}

// run reads the failed set from its start, then, every Poll, again from
// the window behind the newest failure read, until closed or lost.
func (s *Source) run() {
	defer s.done.Done()
	defer close(s.deliveries)
	from := int64(noCursor)
	for {
		if err := s.pass(from); err != nil {
			if s.ctx.Err() == nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		s.mu.Lock()
		from = s.windowStart(s.cursor)
		for id, at := range s.accounted {
			if at < from {
				delete(s.accounted, id)
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.opts.Poll):
		}
	}
}

// page is one read of the failed set: the ids and their scores, and the
// queue's version as it was then.
type page struct {
	version string
	jobs    []redis.Z
}

// pass reads the failed set from score from to its end, a page at a
// time, and delivers what it has not accounted for.
func (s *Source) pass(from int64) error {
	lower, offset := from, int64(0)
	for {
		var p page
		err := s.retry(func(ctx context.Context) error {
			pipe := s.client.Pipeline()
			version := pipe.HGet(ctx, s.keys.of("meta"), "version")
			jobs := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: s.keys.of("failed"), ByScore: true,
				Start: strconv.FormatInt(lower, 10), Stop: "+inf", Offset: offset, Count: int64(s.opts.Page)})
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			p = page{version: version.Val(), jobs: jobs.Val()}
			return nil
		})
		if err != nil {
			return err
		}
		if p.version != s.version {
			// A queue upgraded under the capture to a release whose
			// layout the driver does not know, downgraded or rewritten,
			// stops it; from BullMQ 5 to 6 it goes on, as the failed set
			// and the job hashes are the same in both. Stopping is safe:
			// nothing was changed, and a new capture checks again.
			if !supported(p.version) {
				return &UnsupportedVersionError{Queue: s.ref.Name(), Version: p.version}
			}
			s.version = p.version
		}
		if len(p.jobs) == 0 {
			return nil
		}
		if err := s.deliver(p); err != nil {
			return err
		}
		last := int64(p.jobs[len(p.jobs)-1].Score)
		// The next page starts at the last score, past the members of
		// that score already read: a score shared by more jobs than a
		// page must not read the same page for ever. A job added or
		// removed at that score meanwhile shifts the offset by one; the
		// next poll's window reads the score again.
		same := int64(0)
		for _, z := range p.jobs {
			if int64(z.Score) == last {
				same++
			}
		}
		if last == lower {
			offset += same
		} else {
			lower, offset = last, same
		}
		if len(p.jobs) < s.opts.Page {
			return nil
		}
	}
}

// deliver reads the hashes of the page's jobs not yet accounted for and
// hands each on, waiting for room in the prefetch.
func (s *Source) deliver(p page) error {
	var want []redis.Z
	s.mu.Lock()
	for _, z := range p.jobs {
		if at, ok := s.accounted[z.Member.(string)]; !ok || at != int64(z.Score) {
			want = append(want, z)
		}
	}
	s.mu.Unlock()
	var hashes []*redis.MapStringStringCmd
	if len(want) > 0 {
		err := s.retry(func(ctx context.Context) error {
			pipe := s.client.Pipeline()
			hashes = make([]*redis.MapStringStringCmd, len(want))
			for i, z := range want {
				hashes[i] = pipe.HGetAll(ctx, s.keys.job(z.Member.(string)))
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil || s.ctx.Err() != nil {
			return err
		}
	}
	for i, z := range want {
		id, score := z.Member.(string), int64(z.Score)
		job, ok := storedJob(s.ref, id, hashes[i].Val(), p.version)
		// A failed-set id without its hash is a job half removed (a
		// removal or clean that lost its connection, or a hand-made
		// ZADD): with no data and no history there is nothing to
		// capture, and a replay could only find it deleted. A hash with
		// no finishedOn was retried between the two reads. Either is
		// skipped and accounted for, so Ready does not wait for it.
		if ok {
			d := deadletter.Delivery{Message: job.Message()}
			select {
			case s.room <- struct{}{}:
			case <-s.ctx.Done():
				return nil
			}
			s.mu.Lock()
			s.next++
			d.Tag = s.next
			s.mu.Unlock()
			select {
			case s.deliveries <- d:
			case <-s.ctx.Done():
				return nil
			}
		}
		s.mu.Lock()
		s.accounted[id] = score
		s.cursor = max(s.cursor, score)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.cursor = max(s.cursor, int64(p.jobs[len(p.jobs)-1].Score))
	s.mu.Unlock()
	return nil
}

// retry runs read until it succeeds, backing off while Redis fails it,
// for up to LostAfter: a restart or failover is waited out, and go-redis
// reconnects underneath.
func (s *Source) retry(read func(ctx context.Context) error) error {
	var first time.Time
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		err := read(ctx)
		cancel()
		if err == nil || s.ctx.Err() != nil {
			return nil
		}
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) >= s.opts.LostAfter {
			return fmt.Errorf("read the failed jobs of BullMQ queue %s: Redis failed every read for %s: %w", s.ref.Name(), s.opts.LostAfter, err)
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
