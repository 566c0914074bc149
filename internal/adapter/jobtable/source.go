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
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
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
	feed *pgjobs.Feed
	pool *pgxpool.Pool
	tab  *table
	name string
	opts SourceOptions
	// The statements, built once from the checked mapping.
	keysFirst, keysAfter, rows, allKeys string

	mu        sync.Mutex
	delivered map[jobKey]bool
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
	s := &Source{feed: pgjobs.NewFeed(opts.Prefetch, opts.Page), pool: pool, tab: tab, name: name, opts: opts,
		keysFirst: tab.keysPage(false), keysAfter: tab.keysPage(true), rows: tab.rowsByID(), allKeys: tab.failedKeys(),
		delivered: map[jobKey]bool{}}
	s.feed.Start(opts.Poll, s.walk)
	return s, nil
}

// QueueName is the table's name without credentials, as letters and the
// audit trail name it: jobtable://CONNECTION/SCHEMA.TABLE.
func (s *Source) QueueName() string { return s.name }

// Deliveries implements deadletter.Source. They end when the source is
// closed, or when the database stayed lost for longer than
// SourceOptions.Reconnect (see Err).
func (s *Source) Deliveries() <-chan deadletter.Delivery { return s.feed.Deliveries() }

// Err says why the deliveries ended when the database failed them; nil
// when they were closed.
func (s *Source) Err() error { return s.feed.Err() }

// walk reads every failed row's key in order, delivering the rows not
// delivered before, then forgets the deliveries of rows no longer failed
// as they were.
func (s *Source) walk() error {
	seen := map[jobKey]bool{}
	var after *pageKey
	for {
		var keys []pageKey
		var rows map[jobKey]failedRow
		err := s.feed.Read(s.opts.Reconnect, "read the jobs table "+s.name, func(ctx context.Context) (err error) {
			keys, rows, err = s.page(ctx, after)
			return err
		})
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
	if !s.feed.Reserve() {
		return false
	}
	s.mu.Lock()
	s.delivered[k] = true
	s.mu.Unlock()
	return s.feed.Send(s.tab.stored(s.name, r).Message())
}

// page reads one page of keys and the whole rows of those not yet
// delivered, in one snapshot, so that each row read is the failure its
// key names.
func (s *Source) page(ctx context.Context, after *pageKey) ([]pageKey, map[jobKey]failedRow, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
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

// Acknowledge implements deadletter.Source. The table is not changed: the
// rows stay failed, and acknowledging them only makes room for more
// deliveries.
func (s *Source) Acknowledge(tag uint64) error { return s.feed.Acknowledge(tag) }

// Ready implements deadletter.Source: the failed rows whose failure this
// source has not delivered. It is 0 once all are delivered, so that a
// capture that is not following ends then; the rows themselves stay
// where they are.
func (s *Source) Ready() (int, error) {
	if s.feed.Context().Err() != nil {
		return 0, errors.New("the jobs table source is closed")
	}
	ctx, cancel := context.WithTimeout(s.feed.Context(), 30*time.Second)
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
	s.feed.Close()
	s.pool.Close()
	return nil
}

// LoginStanding is the login the source reads the jobs table as, and the
// ways it holds around the table's own rules (a superuser, the table's
// owner): capture needs only what jobtable.GrantSQL grants.
func (s *Source) LoginStanding() (login string, kinds []string) { return s.tab.login, s.tab.standing }
