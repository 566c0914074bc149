package pgboss

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/store"
)

// Source captures the jobs pg-boss failed for good in one queue of a
// pg-boss database, for deadletter.Ingest. It never changes pg-boss's
// tables: every read is a read-only transaction on a session whose
// transactions are read-only by default. Acknowledging a delivery only
// frees its place in the prefetch, since there is nothing to remove; a
// letter read twice (by a second capture, or after a crash) is stored
// once by its fingerprint, which is the job's id and incarnation.
//
// Jobs come in (completed_on, id) order, and the source keeps polling for
// jobs that fail later. pg-boss sets completed_on to the time its failing
// transaction began, which commits a moment later, so a job may become
// visible behind one already delivered: each poll reads again from
// Lookback before the newest delivered job and skips what this source
// already delivered.
type Source struct {
	// login is the session's login; standing the ways it holds around
	// pg-boss's own rules (store.RelationStanding), for LoginStanding.
	login    string
	standing []string
	pool     *pgxpool.Pool
	ref      Ref
	opts     SourceOptions
	page     string

	deliveries chan deadletter.Delivery
	// room bounds the deliveries not yet acknowledged (the prefetch).
	room   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu    sync.Mutex
	next  uint64 // the last tag handed out
	acked uint64 // every tag up to this one is acknowledged
	// cursor is the newest job delivered; delivered holds what was
	// delivered from Lookback before it on, to skip it when read again.
	cursor    jobKey
	delivered map[jobKey]bool
	err       error
	closed    bool
	closeOnce sync.Once
}

// jobKey is a job's place in capture's order. Since an incarnation is
// completed_on, it is also a failure's identity.
type jobKey struct {
	at time.Time
	// id is the job's uuid as PostgreSQL writes it (lower case, with
	// hyphens), whose order as text is the uuid's own.
	id string
}

// zeroID is the least uuid, the id of the key before every job.
const zeroID = "00000000-0000-0000-0000-000000000000"

func (k jobKey) after(o jobKey) bool {
	return k.at.After(o.at) || (k.at.Equal(o.at) && k.id > o.id)
}

// idOrZero is the key's id for a statement: the least uuid for the key
// before every job.
func (k jobKey) idOrZero() string {
	if k.id == "" {
		return zeroID
	}
	return k.id
}

// SourceOptions tunes a Source. Zero values take the defaults.
type SourceOptions struct {
	// Prefetch is the most deliveries not yet acknowledged (default 1000).
	Prefetch int
	// Poll is how long the source waits between reads once it has read
	// everything (default 500ms).
	Poll time.Duration
	// Lookback is how far behind the newest delivered job each poll reads
	// again, for jobs whose commit came after a later one's (default
	// 30s): it must exceed the time pg-boss takes to commit a failure
	// after it began the transaction.
	Lookback time.Duration
	// Page is how many jobs one read takes (default 500).
	Page int
	// Reconnect is how long a lost pg-boss database is tried again, with
	// backoff, before the deliveries end with Err (default 1 minute).
	Reconnect time.Duration
}

func (o SourceOptions) withDefaults() SourceOptions {
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

// OpenSource connects to the pg-boss database ref names and starts
// reading its queue's failed jobs. It fails at once when the database
// cannot be reached or has no pg-boss schema of a version it knows, and
// with a *QueueMissingError when pg-boss does not know the queue, rather
// than capture nothing from a misspelt one. The login needs SELECT on
// SCHEMA.job and SCHEMA.queue (docs/pgboss.md). Close releases the
// connections.
func OpenSource(ctx context.Context, ref Ref, opts SourceOptions) (*Source, error) {
	cfg, err := ref.PoolConfig()
	if err != nil {
		return nil, err
	}
	// Belt and braces with the read-only transactions: no statement on
	// these sessions can write, whatever the login may.
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	login, standing, err := open(ctx, pool, ref)
	if err != nil {
		pool.Close()
		return nil, err
	}
	opts = opts.withDefaults()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Source{pool: pool, ref: ref, opts: opts, page: ref.sql(pageSQL), standing: standing, login: login,
		deliveries: make(chan deadletter.Delivery, min(opts.Page, 100)), room: make(chan struct{}, opts.Prefetch),
		ctx: sctx, cancel: cancel, delivered: map[jobKey]bool{}}
	s.done.Add(1)
	go s.run()
	return s, nil
}

// open checks, on a new pool, what the source and the retrier both need:
// pg-boss's tables of a version the driver knows, and the queue; it
// returns the login and its standing.
func open(ctx context.Context, pool *pgxpool.Pool, ref Ref) (login string, standing []string, err error) {
	if err := probe(ctx, pool, ref); err != nil {
		return "", nil, err
	}
	if err := checkQueue(ctx, pool, ref); err != nil {
		return "", nil, err
	}
	login, standing, err = store.RelationStanding(ctx, pool, ref.table("job"))
	if err != nil {
		return "", nil, fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	return login, standing, nil
}

// probe reads no row but every column the driver reads, so that a
// database without pg-boss, or with a pg-boss older than the columns,
// says so at once.
func probe(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	for _, stmt := range []string{probeSQL, probeQueueSQL} {
		rows, err := pool.Query(ctx, ref.sql(stmt))
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err == nil {
			continue
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703" || pgErr.Code == "3F000") {
			return fmt.Errorf("the pg-boss database %s has no pg-boss schema %q of pg-boss 12.36.0 or later (schema version 44), which this driver reads: %s "+
				"(is pg-boss's schema another? name it with ?schema=NAME in the connection's url)", ref.DatabaseName(), ref.Schema, pgErr.Message)
		}
		return fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	return nil
}

// QueueName is the pg-boss queue's name without credentials, as letters
// and the audit trail name it: pgboss://CONNECTION/QUEUE.
func (s *Source) QueueName() string { return s.ref.Name() }

// Deliveries implements deadletter.Source. They end when the source is
// closed, or when pg-boss's database stayed lost for longer than
// SourceOptions.Reconnect (see Err).
func (s *Source) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Err says why the deliveries ended when pg-boss's database failed them;
// nil when they were closed.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Source) run() {
	defer s.done.Done()
	defer close(s.deliveries)
	for {
		if err := s.round(); err != nil {
			if s.ctx.Err() == nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.opts.Poll):
		}
	}
}

// round reads from Lookback before the cursor to the end, delivering what
// it has not delivered before.
func (s *Source) round() error {
	s.mu.Lock()
	from := jobKey{}
	if !s.cursor.at.IsZero() {
		from = jobKey{at: s.cursor.at.Add(-s.opts.Lookback)}
	}
	s.mu.Unlock()
	for {
		jobs, err := s.pageRetrying(from)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			from = j.key()
			s.mu.Lock()
			seen := s.delivered[j.key()]
			s.mu.Unlock()
			if seen {
				continue
			}
			if !s.deliver(j) {
				return nil
			}
		}
		if len(jobs) < s.opts.Page {
			break
		}
	}
	s.mu.Lock()
	horizon := s.cursor.at.Add(-s.opts.Lookback)
	for k := range s.delivered {
		if k.at.Before(horizon) {
			delete(s.delivered, k)
		}
	}
	s.mu.Unlock()
	return nil
}

// deliver hands j on once the prefetch has room; false when the source
// was closed first.
func (s *Source) deliver(j jobRow) bool {
	select {
	case s.room <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	// The job counts as delivered before it is handed on: a consumer that
	// has it may ask Ready at once, which must not count it again. A
	// source closed before the hand-off takes the mark back.
	s.mu.Lock()
	s.next++
	tag, key, was := s.next, j.key(), s.cursor
	s.delivered[key] = true
	if key.after(s.cursor) {
		s.cursor = key
	}
	s.mu.Unlock()
	select {
	case s.deliveries <- deadletter.Delivery{Message: j.stored(s.ref.Name()).Message(), Tag: tag}:
		return true
	case <-s.ctx.Done():
		s.mu.Lock()
		delete(s.delivered, key)
		if s.cursor == key {
			s.cursor = was
		}
		s.mu.Unlock()
		return false
	}
}

// pageRetrying reads a page, trying a lost database again with backoff
// for up to Reconnect: a restart of pg-boss's PostgreSQL is a pause, not
// the end of a capture. An answer that no retry changes (no such table,
// no privilege) ends it at once.
func (s *Source) pageRetrying(from jobKey) ([]jobRow, error) {
	var lostSince time.Time
	backoff := 100 * time.Millisecond
	for {
		jobs, err := s.read(from)
		if err == nil {
			return jobs, nil
		}
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		if lastingError(err) {
			return nil, fmt.Errorf("read pg-boss queue %s: %w", s.ref.Name(), err)
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		}
		if time.Since(lostSince) > s.opts.Reconnect {
			return nil, fmt.Errorf("read pg-boss queue %s: the database was lost for over %s: %w", s.ref.Name(), s.opts.Reconnect, err)
		}
		select {
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
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

// read is one page after from, in a read-only transaction.
func (s *Source) read(from jobKey) ([]jobRow, error) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	rows, err := tx.Query(ctx, s.page, s.ref.Queue, from.at, from.idOrZero(), s.opts.Page)
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByName[jobRow])
	if err != nil {
		return nil, err
	}
	return jobs, tx.Commit(ctx)
}

// AckThrough implements deadletter.Source. pg-boss's table is not
// changed: the jobs stay failed, and acknowledging them only makes room
// for more deliveries.
func (s *Source) AckThrough(tag uint64) error {
	s.mu.Lock()
	tag = min(tag, s.next)
	n := 0
	if tag > s.acked {
		n = int(tag - s.acked)
		s.acked = tag
	}
	s.mu.Unlock()
	for range n {
		<-s.room
	}
	return nil
}

// Ready implements deadletter.Source: the queue's failed jobs that this
// source has not delivered, those behind its newest delivery within
// Lookback included. It is 0 once all are delivered, so that a capture
// that is not following ends then; the jobs themselves stay where they
// are.
func (s *Source) Ready() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	closed, cursor := s.closed, s.cursor
	s.mu.Unlock()
	var q interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	} = s.pool
	if closed {
		cfg, err := s.ref.connConfig()
		if err != nil {
			return 0, err
		}
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return 0, fmt.Errorf("the pg-boss database %s: %w", s.ref.DatabaseName(), err)
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
	err = tx.QueryRow(ctx, s.ref.sql(readyAheadSQL), s.ref.Queue, cursor.at, cursor.idOrZero()).Scan(&ahead)
	if err != nil || cursor.at.IsZero() {
		return ahead, err
	}
	rows, err := tx.Query(ctx, s.ref.sql(readyBehindSQL), s.ref.Queue, cursor.at.Add(-s.opts.Lookback), cursor.at, cursor.id)
	if err != nil {
		return 0, err
	}
	behind, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobKey, error) {
		var k jobKey
		err := r.Scan(&k.at, &k.id)
		k.at = k.at.UTC()
		return k, err
	})
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	for _, k := range behind {
		if !s.delivered[k] {
			ahead++
		}
	}
	s.mu.Unlock()
	return ahead, nil
}

// Close stops reading and releases the connections. Nothing needs
// returning: pg-boss's jobs never left their table. Ready still answers
// after Close, on a connection of its own. Closing again does nothing.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.done.Wait()
		s.pool.Close()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	})
	return nil
}

// LoginStanding is the login the source reads pg-boss's database as, and
// the ways it holds around pg-boss's own rules (a superuser, the owner of
// the job table): capture needs only SELECT on SCHEMA.job and
// SCHEMA.queue (docs/pgboss.md).
func (s *Source) LoginStanding() (login string, kinds []string) { return s.login, s.standing }
