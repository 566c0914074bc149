package jobtable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Source captures the rows of a jobs table that are in a failed state,
// for deadletter.Ingest. It never changes the table: every read is a
// read-only transaction on sessions whose transactions are read-only by
// default, and a capture login needs SELECT on the mapped columns alone.
// Acknowledging a delivery only frees its place in the prefetch, since
// there is nothing to remove; a letter read twice (by a second capture,
// or after a crash) is stored once by its fingerprint, which is the row's
// id and incarnation.
//
// Rows come in (failed_at, id) order, or id order without a failed_at
// column, and the source keeps polling. A poller stamps failed_at with
// its own clock and commits a moment later, and a row that fails again
// keeps its id, so a row may turn up behind one already delivered: each
// poll walks every failed row's key again (keys only, not payloads) and
// delivers the rows whose id and incarnation this source has not. What it
// remembers is bounded by the rows failed at the last poll.
type Source struct {
	pool *pgxpool.Pool
	tab  *table
	name string
	opts SourceOptions
	// The statements, built once from the checked mapping.
	keysFirst, keysAfter, rows, allKeys string

	deliveries chan deadletter.Delivery
	// room bounds the deliveries not yet acknowledged (the prefetch).
	room   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	next      uint64 // the last tag handed out
	acked     uint64 // every tag up to this one is acknowledged
	delivered map[jobKey]bool
	err       error
	closeOnce sync.Once
}

// jobKey is one failure of one row: what a letter's identity is.
type jobKey struct{ id, incarnation string }

// pageKey is a failed row's key and its place in capture's order.
type pageKey struct {
	jobKey
	at pgtype.Timestamptz
}

// SourceOptions tunes a Source. Zero values take the defaults.
type SourceOptions struct {
	// Prefetch is the most deliveries not yet acknowledged (default 1000).
	Prefetch int
	// Poll is how long the source waits between walks of the failed rows
	// once it has delivered them all (default 1s). Each walk reads every
	// failed row's key: an index on the status column keeps it cheap.
	Poll time.Duration
	// Page is how many rows one read takes (default 500).
	Page int
	// Reconnect is how long a lost database is tried again, with
	// backoff, before the deliveries end with Err (default 1 minute).
	Reconnect time.Duration
}

func (o SourceOptions) withDefaults() SourceOptions {
	if o.Prefetch <= 0 {
		o.Prefetch = 1000
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
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

// OpenSource connects to ref's database as its login (a password may
// come from the connection's secret, PGPASSWORD or ~/.pgpass rather than
// argv) and starts reading the failed rows of m's
// table. It fails at once when the database cannot be reached, when the
// table does not fit m (Validate), or when the login lacks a privilege
// capture needs (GrantSQL). Close releases the connections.
func OpenSource(ctx context.Context, ref Ref, m Mapping, opts SourceOptions) (*Source, error) {
	pool, tab, name, err := openPool(ctx, ref, m, 3, false)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Source{pool: pool, tab: tab, name: name, opts: opts,
		keysFirst: tab.keysPage(false), keysAfter: tab.keysPage(true), rows: tab.rowsByID(), allKeys: tab.failedKeys(),
		deliveries: make(chan deadletter.Delivery, min(opts.Page, 100)), room: make(chan struct{}, opts.Prefetch),
		ctx: sctx, cancel: cancel, delivered: map[jobKey]bool{}}
	s.done.Add(1)
	go s.run()
	return s, nil
}

// QueueName is the table's name without credentials, as letters and the
// audit trail name it: jobtable://CONNECTION/SCHEMA.TABLE.
func (s *Source) QueueName() string { return s.name }

// Deliveries implements deadletter.Source. They end when the source is
// closed, or when the database stayed lost for longer than
// SourceOptions.Reconnect (see Err).
func (s *Source) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Err says why the deliveries ended when the database failed them; nil
// when they were closed.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Source) run() {
	defer s.done.Done()
	defer close(s.deliveries)
	for {
		if err := s.walk(); err != nil {
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

// walk reads every failed row's key in order, delivering the rows not
// delivered before, then forgets the deliveries of rows no longer failed
// as they were.
func (s *Source) walk() error {
	seen := map[jobKey]bool{}
	var after *pageKey
	for {
		keys, rows, err := s.pageRetrying(after)
		if err != nil {
			return err
		}
		for i := range keys {
			k := keys[i]
			seen[k.jobKey] = true
			after = &k
			r, ok := rows[k.jobKey]
			if !ok {
				continue // delivered before
			}
			if !s.deliver(k.jobKey, r) {
				return nil
			}
		}
		if len(keys) < s.opts.Page {
			break
		}
	}
	s.mu.Lock()
	for k := range s.delivered {
		if !seen[k] {
			delete(s.delivered, k)
		}
	}
	s.mu.Unlock()
	return nil
}

// deliver hands r on once the prefetch has room; false when the source
// was closed first. The row counts as delivered from the moment it has
// room, so that Ready never counts a row on its way.
func (s *Source) deliver(k jobKey, r failedRow) bool {
	select {
	case s.room <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	s.mu.Lock()
	s.next++
	tag := s.next
	s.delivered[k] = true
	s.mu.Unlock()
	select {
	case s.deliveries <- deadletter.Delivery{Message: s.tab.stored(s.name, r).Message(), Tag: tag}:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// pageRetrying reads a page, trying a lost database again with backoff
// for up to Reconnect: a restart of the team's PostgreSQL is a pause, not
// the end of a capture. An answer that no retry changes (a column gone,
// a privilege revoked) ends it at once.
func (s *Source) pageRetrying(after *pageKey) ([]pageKey, map[jobKey]failedRow, error) {
	var lostSince time.Time
	backoff := 100 * time.Millisecond
	for {
		keys, rows, err := s.page(after)
		if err == nil {
			return keys, rows, nil
		}
		if s.ctx.Err() != nil {
			return nil, nil, s.ctx.Err()
		}
		if lastingError(err) {
			return nil, nil, fmt.Errorf("read the jobs table %s: %w", s.name, err)
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		}
		if time.Since(lostSince) > s.opts.Reconnect {
			return nil, nil, fmt.Errorf("read the jobs table %s: the database was lost for over %s: %w", s.name, s.opts.Reconnect, err)
		}
		select {
		case <-s.ctx.Done():
			return nil, nil, s.ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// page reads one page of keys and the whole rows of those not yet
// delivered, in one snapshot, so that each row read is the failure its
// key names.
func (s *Source) page(after *pageKey) ([]pageKey, map[jobKey]failedRow, error) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	var rows pgx.Rows
	if after == nil {
		rows, err = tx.Query(ctx, s.keysFirst, s.tab.m.FailedStates, s.opts.Page)
	} else {
		rows, err = tx.Query(ctx, s.keysAfter, s.tab.m.FailedStates, s.opts.Page, after.at, after.id)
	}
	if err != nil {
		return nil, nil, err
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pageKey, error) {
		var k pageKey
		return k, r.Scan(&k.id, &k.incarnation, &k.at)
	})
	if err != nil {
		return nil, nil, err
	}
	var fresh []string
	s.mu.Lock()
	for _, k := range keys {
		if !s.delivered[k.jobKey] {
			fresh = append(fresh, k.id)
		}
	}
	s.mu.Unlock()
	byKey := map[jobKey]failedRow{}
	if len(fresh) > 0 {
		rows, err := tx.Query(ctx, s.rows, fresh, s.tab.m.FailedStates)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			r, err := s.tab.scanRow(rows)
			if err != nil {
				rows.Close()
				return nil, nil, err
			}
			byKey[jobKey{r.id, r.incarnation}] = r
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return keys, byKey, tx.Commit(ctx)
}

// AckThrough implements deadletter.Source. The table is not changed: the
// rows stay failed, and acknowledging them only makes room for more
// deliveries.
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

// Ready implements deadletter.Source: the failed rows whose failure this
// source has not delivered. It is 0 once all are delivered, so that a
// capture that is not following ends then; the rows themselves stay
// where they are.
func (s *Source) Ready() (int, error) {
	if s.ctx.Err() != nil {
		return 0, errors.New("the jobs table source is closed")
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("the jobs table %s: %w", s.name, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	rows, err := tx.Query(ctx, s.allKeys, s.tab.m.FailedStates)
	if err != nil {
		return 0, fmt.Errorf("the jobs table %s: %w", s.name, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobKey, error) {
		var k jobKey
		return k, r.Scan(&k.id, &k.incarnation)
	})
	if err != nil {
		return 0, fmt.Errorf("the jobs table %s: %w", s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ready := 0
	for _, k := range keys {
		if !s.delivered[k] {
			ready++
		}
	}
	return ready, nil
}

// Close stops reading and releases the connections. Nothing needs
// returning: the rows never left their table. Closing again does
// nothing.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.done.Wait()
		s.pool.Close()
	})
	return nil
}

// LoginStanding is the login the source reads the jobs table as, and the
// ways it holds around the table's own rules (a superuser, the table's
// owner): capture needs only what jobtable.GrantSQL grants.
func (s *Source) LoginStanding() (login string, kinds []string) { return s.tab.login, s.tab.standing }
