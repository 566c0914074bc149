package jobtable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// Retrier is the replay runner's target on a jobs table (a
// replay.Broker): it replays a captured row by putting it back where it
// is, for the team's poller to run again, in one transaction with
// writing the replay's marks on it. It serves the one table of its
// mapping; a message for another table fails its item.
//
// A publish locks the row by its id and puts it back only while it still
// holds the failure the letter captured: a failed state and the same
// incarnation. A row deleted, put back by someone else, or failed again
// since is left alone and its item skipped (replay.JobMovedOnError). A
// row whose marks already name this item of this request was put back by
// an earlier publish of it, whose answer the run lost, and is confirmed
// again without a second retry: that is what makes a resumed run retry
// each job once.
//
// Putting back sets the status to the mapping's ReplayState, the due
// time to the transaction's now(), the marks column to the replay's
// x-replay-* headers (replacing an earlier replay's), and attempts to 0
// when the mapping resets them. The payload, the id and every other
// column stay as they were: the job keeps its identity and idempotency
// key.
type Retrier struct {
	pool *pgxpool.Pool
	tab  *table
	name string
	// The statements, built once from the checked mapping.
	lock, update, depth string
	// retrying bounds the transactions in flight.
	retrying chan struct{}
	wg       sync.WaitGroup
}

// RetrierOptions tunes a Retrier.
type RetrierOptions struct {
	// Concurrency is how many retries run at once, each a transaction on
	// a connection of its own (default 8).
	Concurrency int
}

// OpenRetrier connects to ref's database as OpenSource does, as a login
// that needs the privileges GrantSQL names: it fails at once when the
// table does not fit m or the login lacks one, rather than failing every
// item of a run.
func OpenRetrier(ctx context.Context, ref Ref, m Mapping, opts RetrierOptions) (*Retrier, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	pool, tab, name, err := openPool(ctx, ref, m, int32(opts.Concurrency)+1, true)
	if err != nil {
		return nil, err
	}
	return &Retrier{pool: pool, tab: tab, name: name,
		lock: tab.lockRow(), update: tab.replayRow(), depth: tab.runnable(),
		retrying: make(chan struct{}, opts.Concurrency)}, nil
}

// QueueName is the table's name as letters carry it and as a replay's
// routing key names it: jobtable://CONNECTION/SCHEMA.TABLE.
func (r *Retrier) QueueName() string { return r.name }

// Publish implements replay.Broker: it returns at once, and the Pending
// settles once the retry committed (nil), was refused for good
// (*replay.PublishFailure), found the job moved on (*replay.JobMovedOnError)
// or lost the database, when nobody knows whether it committed
// (*replay.BrokerLostError; the resumed run finds the marks if it did).
func (r *Retrier) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	p := &retrying{done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(p.done)
		select {
		case r.retrying <- struct{}{}:
		case <-ctx.Done():
			p.err = &replay.BrokerLostError{Err: fmt.Errorf("the run stopped before the job was retried: %w", ctx.Err())}
			return
		}
		defer func() { <-r.retrying }()
		p.err = r.retry(ctx, m)
	}()
	return p, nil
}

func (r *Retrier) retry(ctx context.Context, m replay.Message) error {
	refuse := func(reason string) error {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
	}
	// An unset system is taken for a jobs table's: the routing key, a
	// jobtable:// name, says it already.
	if (m.System != System && m.System != "") || m.Exchange != "" {
		return refuse("not a jobs table row: a jobs table replay puts back rows captured from that table, in place")
	}
	if m.RoutingKey != r.name {
		return refuse(fmt.Sprintf("this replay reaches the jobs table %s, not %s", r.name, m.RoutingKey))
	}
	if m.Job.ID == "" || m.Job.Incarnation == "" {
		return refuse(fmt.Sprintf("job %q, incarnation %q names no row", m.Job.ID, m.Job.Incarnation))
	}
	request, ok1 := pgjobs.WholeNumber(m.Headers[replay.HeaderReplayRequest])
	item, ok2 := pgjobs.WholeNumber(m.Headers[replay.HeaderReplayItem])
	if !ok1 || !ok2 {
		// Without them on the row, a resumed run could not tell its own
		// earlier retry from someone else's.
		return refuse("the replay names no request and item (x-replay-request, x-replay-item) to mark the row with")
	}
	marks, err := json.Marshal(m.Headers)
	if err != nil {
		return refuse(fmt.Sprintf("the replay's marks do not encode as JSON: %v", err))
	}

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return &replay.BrokerLostError{Err: fmt.Errorf("the jobs table %s: %w", r.name, err)}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var (
		status, old *string
		incarnation string
	)
	err = tx.QueryRow(ctx, r.lock, m.Job.ID).Scan(&status, &incarnation, &old)
	if errors.Is(err, pgx.ErrNoRows) {
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "deleted"}
	}
	if err != nil {
		return r.failed(m, err)
	}
	if old != nil && pgjobs.MarkedBy([]byte(*old), request, item) {
		return nil
	}
	switch {
	case status == nil || !slices.Contains(r.tab.m.FailedStates, *status):
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "status " + statusText(status) + movedBy(old)}
	case incarnation != m.Job.Incarnation:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: fmt.Sprintf("status %s, incarnation %s: it failed again since", statusText(status), incarnation)}
	}
	if _, err := tx.Exec(ctx, r.update, m.Job.ID, r.tab.m.ReplayState, string(marks)); err != nil {
		return r.failed(m, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// A commit whose answer was lost may have committed: the resumed
		// run finds the marks and does not retry again.
		return &replay.BrokerLostError{Err: fmt.Errorf("commit the retry of row %s of %s: %w", m.Job.ID, r.name, err)}
	}
	return nil
}

func statusText(s *string) string {
	if s == nil {
		return "NULL"
	}
	return strconv.Quote(*s)
}

// movedBy says which replay the marks name, when a row was put back by
// another request than the one asking.
func movedBy(raw *string) string {
	if raw == nil {
		return ""
	}
	m := pgjobs.Marks([]byte(*raw))
	request, ok1 := pgjobs.WholeNumber(m[replay.HeaderReplayRequest])
	item, ok2 := pgjobs.WholeNumber(m[replay.HeaderReplayItem])
	if !ok1 || !ok2 {
		return ""
	}
	return fmt.Sprintf(", last put back by replay request %d (item %d)", request, item)
}

// failed is an error inside the transaction: PostgreSQL's own answer
// rolled it back and fails the item; anything else lost the database.
func (r *Retrier) failed(m replay.Message, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey,
			Reason: "the jobs table's database refused the retry: " + pgErr.Message + " (" + pgErr.Code + ")"}
	}
	return &replay.BrokerLostError{Err: fmt.Errorf("row %s of %s: %w", m.Job.ID, r.name, err)}
}

// QueueDepth implements replay.Broker for the retrier's own table, named
// as letters name it: the rows in the replay's state whose due time has
// come, which the poller would take next. Another table of the same
// database does not exist as far as this retrier knows (0, false); one in
// another database is an error.
func (r *Retrier) QueueDepth(ctx context.Context, queue string) (depth int, exists bool, err error) {
	if queue != r.name {
		if deadletter.QueueSystem(queue) == System && sameDatabase(queue, r.name) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("queue %s is not the jobs table %s this replay reaches", queue, r.name)
	}
	if err := r.pool.QueryRow(ctx, r.depth, r.tab.m.ReplayState).Scan(&depth); err != nil {
		return 0, false, fmt.Errorf("depth of the jobs table %s: %w", r.name, err)
	}
	return depth, true, nil
}

// sameDatabase says whether two jobtable:// names are of one database:
// equal up to the last slash, before SCHEMA.TABLE.
func sameDatabase(a, b string) bool {
	return a[:max(strings.LastIndex(a, "/"), 0)] == b[:max(strings.LastIndex(b, "/"), 0)]
}

// Close waits for the retries in flight to settle and releases the
// connections.
func (r *Retrier) Close() error {
	r.wg.Wait()
	r.pool.Close()
	return nil
}

// retrying is a retry on its way (a replay.Pending).
type retrying struct {
	done chan struct{}
	err  error
}

func (p *retrying) Done() <-chan struct{} { return p.done }
func (p *retrying) Outcome() error        { return p.err }

// LoginStanding is the login the retrier writes the jobs table as, and
// the ways it holds around the table's own rules (a superuser, the
// table's owner): a replay needs only what jobtable.GrantSQL grants.
func (r *Retrier) LoginStanding() (login string, kinds []string) { return r.tab.login, r.tab.standing }
