package riverjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// Retrier is the replay runner's target on River (a replay.Broker): it
// replays a captured job by retrying it where it is, through River's own
// Client.JobRetryTx, in one transaction with writing the replay's marks
// on the job (metadata key MarksKey). It serves every queue of one River
// database; a message for another database fails its item.
//
// A publish locks the job's row and retries it only while River still
// holds the failure the letter captured: the same finalized_at (the
// incarnation) in state discarded or cancelled. A job deleted, retried
// by someone else, or failed again since is left alone and its item
// skipped (replay.JobMovedOnError). A job whose marks already name this
// item of this request was retried by an earlier publish of it, whose
// confirmation the run lost, and is confirmed again without a second
// retry: that is what makes a resumed run retry each job once.
//
// What River's JobRetry does (v0.51.2, riverpgxv5's JobRetry query): the
// job becomes available with finalized_at cleared and scheduled_at now,
// so it runs next in its queue by priority; max_attempts grows by one
// when attempt had reached it, so the retry gets exactly one more try
// (attempt is not reset, and errors keep the history); metadata loses
// cancel_attempted_at, so an earlier cancel request does not cancel the
// retry. Args, kind, queue, priority, tags and unique_key stay as they
// were; a unique job whose key another live job holds now cannot be
// retried, and its item fails.
type Retrier struct {
	// login is the sessions' login; standing the ways it holds around
	// River's own rules (store.RelationStanding), for LoginStanding.
	login    string
	standing []string
	pool     *pgxpool.Pool
	client   *river.Client[pgx.Tx]
	ref      Ref
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

// OpenRetrier connects to the River database ref names, as ref's login,
// which needs SELECT and UPDATE on river_job (docs/river.md). ref's queue
// is the first target of the run: a queue River does not know is refused
// with a *QueueMissingError (CheckQueue checks the run's other targets).
// The retrier then serves every queue of the database: each message names
// its own.
func OpenRetrier(ctx context.Context, ref Ref, opts RetrierOptions) (*Retrier, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(opts.Concurrency) + 1
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
	// River's JobRetry returns the whole row, unique_states included,
	// which came with River's migration 006: an older schema would fail
	// every item, so it fails here once.
	if _, err := pool.Exec(ctx, "SELECT unique_states FROM river_job LIMIT 0"); err != nil {
		pool.Close()
		return nil, fmt.Errorf("the River database %s cannot be retried on by River %s: its schema predates River's migration 006 (River 0.12.0): %w",
			ref.DatabaseName(), riverVersion, err)
	}
	// No queues and no workers: an insert-only client, which is all
	// JobRetryTx needs, and which never starts to work jobs here.
	// Its logger is silent: River logs to stdout by default, where a
	// command's data goes, and the retrier reports through its errors.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("a River client on %s: %w", ref.DatabaseName(), err)
	}
	return &Retrier{pool: pool, client: client, ref: ref, retrying: make(chan struct{}, opts.Concurrency), login: login, standing: standing}, nil
}

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
	// An unset system is taken for River's: the routing key, a river://
	// name, says it already.
	if (m.System != System && m.System != "") || m.Exchange != "" {
		return refuse("not a River job: a River replay retries jobs captured from River in place")
	}
	target, err := r.target(m.RoutingKey)
	if err != nil {
		return refuse(err.Error())
	}
	id, err := strconv.ParseInt(m.Job.ID, 10, 64)
	if err != nil || m.Job.Incarnation == "" {
		return refuse(fmt.Sprintf("job %q, incarnation %q names no River job", m.Job.ID, m.Job.Incarnation))
	}
	marks, err := json.Marshal(m.Headers)
	if err != nil {
		return refuse(fmt.Sprintf("the replay's marks do not encode as JSON: %v", err))
	}
	request, _ := wholeNumber(m.Headers[replay.HeaderReplayRequest])

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return &replay.BrokerLostError{Err: fmt.Errorf("the River database %s: %w", r.ref.DatabaseName(), err)}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var (
		state, queue string
		finalizedAt  *time.Time
		old          []byte
	)
	err = tx.QueryRow(ctx, `SELECT state::text, queue, finalized_at, metadata -> '`+MarksKey+`'
		FROM river_job WHERE id = $1 FOR UPDATE`, id).Scan(&state, &queue, &finalizedAt, &old)
	if errors.Is(err, pgx.ErrNoRows) {
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "deleted"}
	}
	if err != nil {
		return failed(m, err)
	}
	if request != 0 && markedBy(old, request, m.Item) {
		return nil
	}
	switch {
	case queue != target.Queue:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "a job of queue " + strconv.Quote(queue)}
	case state != StateDiscarded && state != StateCancelled:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "state " + state}
	case finalizedAt == nil || Incarnation(*finalizedAt) != m.Job.Incarnation:
		now := "state " + state
		if finalizedAt != nil {
			now += " since " + Incarnation(*finalizedAt) + ": it failed again"
		}
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: now}
	}
	if _, err := tx.Exec(ctx, `UPDATE river_job SET metadata = jsonb_set(metadata, '{`+MarksKey+`}', $2::jsonb) WHERE id = $1`,
		id, string(marks)); err != nil {
		return failed(m, err)
	}
	if _, err := r.client.JobRetryTx(ctx, tx, id); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return refuse("River refused the retry: another live job holds this unique job's key")
		}
		return failed(m, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// A commit whose answer was lost may have committed: the resumed
		// run finds the marks and does not retry again.
		return &replay.BrokerLostError{Err: fmt.Errorf("commit the retry of River job %d: %w", id, err)}
	}
	return nil
}

// failed is an error inside the transaction: PostgreSQL's own answer
// rolled it back and fails the item; anything else lost the database.
func failed(m replay.Message, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: "River's database refused the retry: " + pgErr.Message + " (" + pgErr.Code + ")"}
	}
	return &replay.BrokerLostError{Err: fmt.Errorf("job %s on %s: %w", m.Job.ID, m.RoutingKey, err)}
}

// riverVersion is the River module whose JobRetry this driver calls.
const riverVersion = "v0.51.2"

// markedBy says whether the marks on a job name item of request.
func markedBy(raw []byte, request, item int64) bool {
	m := marks([]byte(`{"` + MarksKey + `":` + string(raw) + `}`))
	if len(raw) == 0 || m == nil {
		return false
	}
	gotRequest, ok1 := wholeNumber(m[replay.HeaderReplayRequest])
	gotItem, ok2 := wholeNumber(m[replay.HeaderReplayItem])
	return ok1 && ok2 && gotRequest == request && gotItem == item
}

func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// ExchangeExists implements replay.Broker: River has no exchanges; a
// River target is a queue through the default one.
func (r *Retrier) ExchangeExists(_ context.Context, exchange string) (bool, error) {
	return exchange == "", nil
}

// QueueDepth implements replay.Broker for a queue named as letters name
// it (river://CONNECTION/QUEUE): the jobs waiting to be worked,
// those available and those retryable or scheduled whose time has come.
// The queue exists when River knows it (a river_queue row, which a
// client working it keeps) or it holds any job.
func (r *Retrier) QueueDepth(ctx context.Context, queue string) (depth int, exists bool, err error) {
	target, err := r.target(queue)
	if err != nil {
		return 0, false, err
	}
	err = r.pool.QueryRow(ctx, queueDepthSQL,
		target.Queue).Scan(&depth, &exists)
	if err != nil {
		return 0, false, fmt.Errorf("depth of River queue %s: %w", target.Name(), err)
	}
	return depth, exists, nil
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

// target is the queue a letter's or a request's name (river://CONNECTION/QUEUE)
// names on this retrier's connection; a queue of another connection is
// refused, never reached.
func (r *Retrier) target(name string) (Ref, error) {
	conn, queue, err := SplitName(name)
	if err != nil {
		return Ref{}, err
	}
	if conn != r.ref.Conn {
		return Ref{}, fmt.Errorf("queue %s is of connection %q, and this replay reaches connection %q", name, conn, r.ref.Conn)
	}
	target := r.ref
	if target.Queue, err = url.PathUnescape(strings.SplitN(queue, "?", 2)[0]); err != nil {
		return Ref{}, fmt.Errorf("queue %s: its name is badly escaped", name)
	}
	return target, nil
}

// LoginStanding is the login the retrier writes River's database as, and
// the ways it holds around River's own rules (a superuser, the owner of
// river_job): a replay needs only SELECT and UPDATE on river_job
// (docs/river.md).
func (r *Retrier) LoginStanding() (login string, kinds []string) { return r.login, r.standing }
