package pgjobs

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Key is a failed job's place in capture's order: when it failed, then its
// id. Since a retry clears the time and the next failure sets a new one,
// it is also the failure's identity.
type Key[ID cmp.Ordered] struct {
	At time.Time
	ID ID
}

// After says whether k comes after o in capture's order.
func (k Key[ID]) After(o Key[ID]) bool {
	return k.At.After(o.At) || (k.At.Equal(o.At) && k.ID > o.ID)
}

// Options tunes a Poller. Zero values take the defaults.
type Options struct {
	// Prefetch is the most deliveries not yet acknowledged (default 1000).
	Prefetch int
	// Poll is how long the source waits between reads once it has read
	// everything (default 500ms).
	Poll time.Duration
	// Lookback is how far behind the newest delivered job each poll reads
	// again, for jobs whose commit came after a later one's (default
	// 30s): it must exceed the time the job store takes to commit a
	// failure after it stamped its time, and the clock skew between the
	// clients that stamp it.
	Lookback time.Duration
	// Page is how many jobs one read takes (default 500).
	Page int
	// Reconnect is how long a lost database is tried again, with
	// backoff, before the deliveries end with Err (default 1 minute).
	Reconnect time.Duration
}

func (o Options) withDefaults() Options {
	if o.Prefetch <= 0 {
		o.Prefetch = 1000
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Lookback <= 0 {
		o.Lookback = 30 * time.Second
	}
	if o.Page <= 0 {
		o.Page = 500
	}
	o.Page = min(o.Page, o.Prefetch)
	if o.Reconnect <= 0 {
		o.Reconnect = time.Minute
	}
	return o
}

// Queue is one queue of a job store as a Poller reads it: the driver's
// statements on its failed jobs, each with its arguments, and how a row
// of them becomes a letter. The Poller runs each in a read-only
// transaction.
type Queue[ID cmp.Ordered, J any] struct {
	// Name is the queue's name without credentials, as letters and the
	// audit trail name it (a driver's Ref.Name).
	Name string
	// Page reads up to n of the queue's failed jobs after from, in Key
	// order. from is the zero Key before the first job.
	Page func(from Key[ID], n int) (sql string, args []any)
	// Scan reads one row of Page.
	Scan pgx.RowToFunc[J]
	// Key is a job's place in capture's order.
	Key func(J) Key[ID]
	// Letter is the job as the message its letter is made of.
	Letter func(J) deadletter.Message
	// Ahead counts the queue's failed jobs after cursor.
	Ahead func(cursor Key[ID]) (sql string, args []any)
	// Behind lists the keys (failed at, id) of the queue's failed jobs
	// failed since since, through cursor.
	Behind func(since time.Time, cursor Key[ID]) (sql string, args []any)
}

// Poller captures the failed jobs of one queue of a job store that keeps
// them in a PostgreSQL table, for deadletter.Ingest (a deadletter.Source).
// It never changes the table: every read is a read-only transaction on a
// session whose transactions are read-only by default. Acknowledging a
// delivery only frees its place in the prefetch, since there is nothing
// to remove; a letter read twice (by a second capture, or after a crash)
// is stored once by its fingerprint, which is the job's id and
// incarnation.
//
// Jobs come in Key order, and the poller keeps polling for jobs that fail
// later. A job store stamps a failure's time a moment before it commits
// it, so a job may become visible behind one already delivered: each poll
// reads again from Lookback before the newest delivered job and skips
// what this poller already delivered.
type Poller[ID cmp.Ordered, J any] struct {
	feed     *Feed
	pool     *pgxpool.Pool
	db       Database
	queue    Queue[ID, J]
	opts     Options
	standing Standing

	mu sync.Mutex
	// cursor is the newest job delivered; delivered holds what was
	// delivered from Lookback before it on, to skip it when read again.
	cursor    Key[ID]
	delivered map[Key[ID]]bool
	closed    bool
}

// OpenPoller connects to db with cfg, on at most three sessions whose
// transactions are read-only by default, runs check on them, and starts
// reading q. Close releases the connections.
func OpenPoller[ID cmp.Ordered, J any](ctx context.Context, cfg *pgxpool.Config, db Database, check Check, q Queue[ID, J], opts Options) (*Poller[ID, J], error) {
	// Belt and braces with the read-only transactions: no statement on
	// these sessions can write, whatever the login may.
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.MaxConns = 3
	pool, standing, err := Connect(ctx, cfg, db, check)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	p := &Poller[ID, J]{feed: NewFeed(opts.Prefetch, opts.Page), pool: pool, db: db, queue: q, opts: opts, standing: standing,
		delivered: map[Key[ID]]bool{}}
	p.feed.Start(opts.Poll, p.round)
	return p, nil
}

// QueueName is the queue's name without credentials, as letters and the
// audit trail name it.
func (p *Poller[ID, J]) QueueName() string { return p.queue.Name }

// Deliveries implements deadletter.Source. They end when the poller is
// closed, or when the database stayed lost for longer than
// Options.Reconnect (see Err).
func (p *Poller[ID, J]) Deliveries() <-chan deadletter.Delivery { return p.feed.Deliveries() }

// Err says why the deliveries ended when the database failed them; nil
// when they were closed.
func (p *Poller[ID, J]) Err() error { return p.feed.Err() }

// Acknowledge implements deadletter.Source. The job table is not changed:
// the jobs stay failed, and acknowledging them only makes room for more
// deliveries.
func (p *Poller[ID, J]) Acknowledge(tag uint64) error { return p.feed.Acknowledge(tag) }

// LoginStanding is the login the poller reads the job store as, and the
// ways it holds around the store's own rules (a superuser, the owner of
// the job table), which capture does not need.
func (p *Poller[ID, J]) LoginStanding() (login string, kinds []string) {
	return p.standing.Login, p.standing.Kinds
}

// round reads from Lookback before the cursor to the end, delivering what
// it has not delivered before.
func (p *Poller[ID, J]) round() error {
	p.mu.Lock()
	from := Key[ID]{}
	if !p.cursor.At.IsZero() {
		from = Key[ID]{At: p.cursor.At.Add(-p.opts.Lookback)}
	}
	p.mu.Unlock()
	for {
		var jobs []J
		err := p.feed.Read(p.opts.Reconnect, "read "+p.db.Title+" queue "+p.queue.Name, func(ctx context.Context) (err error) {
			jobs, err = p.page(ctx, from)
			return err
		})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			key := p.queue.Key(j)
			from = key
			p.mu.Lock()
			seen := p.delivered[key]
			p.mu.Unlock()
			if seen {
				continue
			}
			if !p.deliver(key, j) {
				return nil
			}
		}
		if len(jobs) < p.opts.Page {
			break
		}
	}
	p.mu.Lock()
	horizon := p.cursor.At.Add(-p.opts.Lookback)
	for k := range p.delivered {
		if k.At.Before(horizon) {
			delete(p.delivered, k)
		}
	}
	p.mu.Unlock()
	return nil
}

// deliver hands j on once the prefetch has room; false when the poller
// was closed first.
func (p *Poller[ID, J]) deliver(key Key[ID], j J) bool {
	if !p.feed.Reserve() {
		return false
	}
	// The job counts as delivered before it is handed on: a consumer that
	// has it may ask Ready at once, which must not count it again. A
	// poller closed before the hand-off takes the mark back.
	p.mu.Lock()
	was := p.cursor
	p.delivered[key] = true
	if key.After(p.cursor) {
		p.cursor = key
	}
	p.mu.Unlock()
	if p.feed.Send(p.queue.Letter(j)) {
		return true
	}
	p.mu.Lock()
	delete(p.delivered, key)
	if p.cursor == key {
		p.cursor = was
	}
	p.mu.Unlock()
	return false
}

// page is one page after from, in a read-only transaction.
func (p *Poller[ID, J]) page(ctx context.Context, from Key[ID]) ([]J, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	sql, args := p.queue.Page(from, p.opts.Page)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, p.queue.Scan)
	if err != nil {
		return nil, err
	}
	return jobs, tx.Commit(ctx)
}

// Ready implements deadletter.Source: the queue's failed jobs that this
// poller has not delivered, those behind its newest delivery within
// Lookback included. It is 0 once all are delivered, so that a capture
// that is not following ends then; the jobs themselves stay where they
// are. After Close it still answers, on a connection of its own.
func (p *Poller[ID, J]) Ready() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.mu.Lock()
	closed, cursor := p.closed, p.cursor
	p.mu.Unlock()
	var q interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	} = p.pool
	if closed {
		// The pool's own settings: read-only by default, as its sessions.
		conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig)
		if err != nil {
			return 0, p.db.errorf(err)
		}
		defer conn.Close(ctx)
		q = conn
	}
	tx, err := q.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	var ahead int
	sql, args := p.queue.Ahead(cursor)
	err = tx.QueryRow(ctx, sql, args...).Scan(&ahead)
	if err != nil || cursor.At.IsZero() {
		return ahead, err
	}
	sql, args = p.queue.Behind(cursor.At.Add(-p.opts.Lookback), cursor)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	behind, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key[ID], error) {
		var k Key[ID]
		err := r.Scan(&k.At, &k.ID)
		k.At = k.At.UTC()
		return k, err
	})
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	for _, k := range behind {
		if !p.delivered[k] {
			ahead++
		}
	}
	p.mu.Unlock()
	return ahead, nil
}

// Close stops reading and releases the connections. Nothing needs
// returning: the jobs never left their table. Ready still answers after
// Close, on a connection of its own. Closing again does nothing.
func (p *Poller[ID, J]) Close() error {
	p.feed.Close()
	p.pool.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}
