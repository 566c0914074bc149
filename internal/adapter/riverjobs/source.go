package riverjobs

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

// Source captures the jobs River discarded (and cancelled, when the
// reference asks) in one queue of a River database, for deadletter.Ingest.
// It never changes river_job: every read is a read-only transaction on a
// session whose transactions are read-only by default. Acknowledging a
// delivery only frees its place in the prefetch, since there is nothing
// to remove; a letter read twice (by a second capture, or after a crash)
// is stored once by its fingerprint, which is the job's id and
// incarnation.
//
// Jobs come in (finalized_at, id) order, and the source keeps polling for
// jobs finalized later. River sets finalized_at from the clock of the
// client that ran the job, and that client commits it a moment later, so
// a job may become visible behind one already delivered: each poll reads
// again from Lookback before the newest delivered job and skips what this
// source already delivered.
type Source struct {
	// login is the session's login; standing the ways it holds around
	// River's own rules (store.RelationStanding), for LoginStanding.
	login    string
	standing []string
	pool     *pgxpool.Pool
	ref      Ref
	opts     SourceOptions
	query    string

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
// finalized_at, it is also a failure's identity.
type jobKey struct {
	at time.Time
	id int64
}

func (k jobKey) after(o jobKey) bool {
	return k.at.After(o.at) || (k.at.Equal(o.at) && k.id > o.id)
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
	// 30s): it must exceed the clock skew between River's clients plus
	// the time River takes to commit a job it finished.
	Lookback time.Duration
	// Page is how many jobs one read takes (default 500).
	Page int
	// Reconnect is how long a lost River database is tried again, with
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

// OpenSource connects to the River database ref names and starts reading
// its queue. It fails at once when the database cannot be reached or has
// no river_job table of a River version it knows, and with a
// *QueueMissingError when River does not know the queue (no river_queue
// row and no job names it), rather than capture nothing from a misspelt
// one. Close releases the connections.
func OpenSource(ctx context.Context, ref Ref, opts SourceOptions) (*Source, error) {
	if len(ref.States) == 0 {
		ref.States = []string{StateDiscarded}
	}
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
		return nil, fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
	}
	if err := probe(ctx, pool, ref); err != nil {
		pool.Close()
		return nil, err
	}
	if err := checkQueue(ctx, pool, ref); err != nil {
		pool.Close()
		return nil, err
	}
	login, standing, err := store.RelationStanding(ctx, pool, "river_job")
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
	}
	opts = opts.withDefaults()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Source{pool: pool, ref: ref, opts: opts, query: pageQuery(ref.States), standing: standing, login: login,
		deliveries: make(chan deadletter.Delivery, min(opts.Page, 100)), room: make(chan struct{}, opts.Prefetch),
		ctx: sctx, cancel: cancel, delivered: map[jobKey]bool{}}
	s.done.Add(1)
	go s.run()
	return s, nil
}

// probe reads no row but every column capture reads, so that a database
// without River, or with a River older than the columns, says so at once.
func probe(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	rows, err := pool.Query(ctx, "SELECT "+jobColumns+" FROM river_job LIMIT 0")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return fmt.Errorf("the River database %s has no river_job table of River 0.10 or later (River's migration 005 or later): %s", ref.DatabaseName(), pgErr.Message)
	}
	return fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
}

// pageQuery reads one page of the queue's jobs in states after a key, in
// order. One ordered subquery per state lets each walk the (state,
// finalized_at) index River keeps and stop at the page's end, rather than
// sort every failed job of the table on each page.
func pageQuery(states []string) string {
	parts := make([]string, len(states))
	for i, st := range states {
		// st is one of the constants: parseStates admits nothing else.
		parts[i] = `(SELECT ` + jobColumns + ` FROM river_job
			WHERE state = '` + st + `' AND queue = $1 AND finalized_at >= $2 AND (finalized_at, id) > ($2, $3)
			ORDER BY finalized_at, id LIMIT $4)`
	}
	if len(parts) == 1 {
		return parts[0]
	}
	// The outer select names the columns by position: the subqueries'
	// expressions have no names of their own.
	return `SELECT * FROM (` + strings.Join(parts, " UNION ALL ") + `) AS j ORDER BY 7, 1 LIMIT $4`
}

// QueueName is the River queue's name without credentials, as letters and
// the audit trail name it: river://CONNECTION/QUEUE.
func (s *Source) QueueName() string { return s.ref.Name() }

// Deliveries implements deadletter.Source. They end when the source is
// closed, or when the River database stayed lost for longer than
// SourceOptions.Reconnect (see Err).
func (s *Source) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Err says why the deliveries ended when River's database failed them;
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
// for up to Reconnect: a restart of River's PostgreSQL is a pause, not
// the end of a capture. An answer that no retry changes (no such table,
// no privilege) ends it at once.
func (s *Source) pageRetrying(from jobKey) ([]jobRow, error) {
	var lostSince time.Time
	backoff := 100 * time.Millisecond
	for {
		jobs, err := s.page(from)
		if err == nil {
			return jobs, nil
		}
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		if lastingError(err) {
			return nil, fmt.Errorf("read River queue %s: %w", s.ref.Name(), err)
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		}
		if time.Since(lostSince) > s.opts.Reconnect {
			return nil, fmt.Errorf("read River queue %s: the database was lost for over %s: %w", s.ref.Name(), s.opts.Reconnect, err)
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
// violations (class 42) and authorisation (class 28) stay as they are
// however often the read is tried.
func lastingError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "28"))
}

func (s *Source) page(from jobKey) ([]jobRow, error) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	rows, err := tx.Query(ctx, s.query, s.ref.Queue, from.at, from.id, s.opts.Page)
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobRow, error) { return scanJob(r) })
	if err != nil {
		return nil, err
	}
	return jobs, tx.Commit(ctx)
}

// AckThrough implements deadletter.Source. River's table is not changed:
// the jobs stay discarded, and acknowledging them only makes room for
// more deliveries.
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

// Ready implements deadletter.Source: the queue's jobs in the captured
// states that this source has not delivered, those behind its newest
// delivery within Lookback included. It is 0 once all are delivered, so
// that a capture that is not following ends then; the jobs themselves
// stay where they are.
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
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return 0, fmt.Errorf("the River database %s: %w", s.ref.DatabaseName(), err)
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
	err = tx.QueryRow(ctx, readyAheadSQL,
		s.ref.States, s.ref.Queue, cursor.at, cursor.id).Scan(&ahead)
	if err != nil || cursor.at.IsZero() {
		return ahead, err
	}
	rows, err := tx.Query(ctx, readyBehindSQL,
		s.ref.States, s.ref.Queue, cursor.at.Add(-s.opts.Lookback), cursor.at, cursor.id)
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
// returning: River's jobs never left their table. Ready still answers
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

// LoginStanding is the login the source reads River's database as, and
// the ways it holds around River's own rules (a superuser, the owner of
// river_job): capture needs only SELECT on river_job (docs/river.md).
func (s *Source) LoginStanding() (login string, kinds []string) { return s.login, s.standing }
