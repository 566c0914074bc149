package pgboss

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/replay"
)

// Retrier is the replay runner's target on pg-boss (a replay.Broker): it
// replays a captured job by retrying it where it is, as pg-boss's own
// retry(name, id) does, in one transaction with writing the replay's
// marks on the job (trace_context, key MarksKey). It serves every queue
// of one pg-boss schema; a message for another connection fails its item.
//
// A publish locks the job's row and retries it only while pg-boss still
// holds the failure the letter captured: state failed with the same
// completed_on (the incarnation). A job deleted, retried by someone else,
// or failed again since is left alone and its item skipped
// (replay.JobMovedOnError). A job whose marks already name this item of
// this request was retried by an earlier publish of it, whose
// confirmation the run lost, and is confirmed again without a second
// retry: that is what makes a resumed run retry each job once.
//
// What the retry does (retryJobSQL): the job goes to state retry with
// completed_on cleared and start_after now, so the queue's workers fetch
// it next by priority and age; retry_limit grows by one, so the retry gets
// exactly one more try (retry_count is not reset, and the worker's fetch
// adds one to it as for any retry); keep_until moves as far as start_after
// did, so that pg-boss's maintenance does not expire the job before it
// runs. Data, output (the last error, until the next attempt), priority,
// singleton_key and the queue stay as they were; a job whose singleton key
// another waiting job holds now (a stately or exclusive queue) cannot be
// retried, and its item fails.
type Retrier struct {
	// login is the sessions' login; standing the ways it holds around
	// pg-boss's own rules (store.RelationStanding), for LoginStanding.
	login    string
	standing []string
	pool     *pgxpool.Pool
	ref      Ref
	// lock and update are lockJobSQL and retryJobSQL on ref's schema.
	lock, update string
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

// OpenRetrier connects to the pg-boss database ref names, as ref's login,
// which needs SELECT on SCHEMA.job and SCHEMA.queue and UPDATE of the
// columns a retry writes (docs/pgboss.md). ref's queue is the first
// target of the run: a queue pg-boss does not know is refused with a
// *QueueMissingError (CheckQueue checks the run's other targets). The
// retrier then serves every queue of the schema: each message names its
// own.
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
		return nil, fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	login, standing, err := open(ctx, pool, ref)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Retrier{pool: pool, ref: ref, lock: ref.sql(lockJobSQL), update: ref.sql(retryJobSQL),
		retrying: make(chan struct{}, opts.Concurrency), login: login, standing: standing}, nil
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

// uuidText is a uuid as PostgreSQL reads one in its canonical form; a job
// id that is not one names no pg-boss job.
var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (r *Retrier) retry(ctx context.Context, m replay.Message) error {
	refuse := func(reason string) error {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
	}
	// An unset system is taken for pg-boss's: the routing key, a
	// pgboss:// name, says it already.
	if (m.System != System && m.System != "") || m.Exchange != "" {
		return refuse("not a pg-boss job: a pg-boss replay retries jobs captured from pg-boss in place")
	}
	target, err := r.target(m.RoutingKey)
	if err != nil {
		return refuse(err.Error())
	}
	if !uuidText.MatchString(m.Job.ID) || m.Job.Incarnation == "" {
		return refuse(fmt.Sprintf("job %q, incarnation %q names no pg-boss job", m.Job.ID, m.Job.Incarnation))
	}
	marks, err := json.Marshal(m.Headers)
	if err != nil {
		return refuse(fmt.Sprintf("the replay's marks do not encode as JSON: %v", err))
	}
	request, _ := wholeNumber(m.Headers[replay.HeaderReplayRequest])

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return &replay.BrokerLostError{Err: fmt.Errorf("the pg-boss database %s: %w", r.ref.DatabaseName(), err)}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var (
		state       string
		completedOn *time.Time
		old         []byte
	)
	err = tx.QueryRow(ctx, r.lock, target.Queue, m.Job.ID).Scan(&state, &completedOn, &old)
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
	case state != StateFailed:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "state " + state}
	case completedOn == nil || Incarnation(*completedOn) != m.Job.Incarnation:
		now := "state " + state
		if completedOn != nil {
			now += " since " + Incarnation(*completedOn) + ": it failed again"
		}
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: now}
	}
	tag, err := tx.Exec(ctx, r.update, target.Queue, m.Job.ID, string(marks))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return refuse("pg-boss refused the retry: another waiting job of the queue holds this job's singleton key (" + pgErr.ConstraintName + ")")
		}
		return failed(m, err)
	}
	if tag.RowsAffected() != 1 {
		// The row is locked and was failed: only a broken invariant
		// gets here.
		return refuse(fmt.Sprintf("the retry of pg-boss job %s changed %d rows", m.Job.ID, tag.RowsAffected()))
	}
	if err := tx.Commit(ctx); err != nil {
		// A commit whose answer was lost may have committed: the resumed
		// run finds the marks and does not retry again.
		return &replay.BrokerLostError{Err: fmt.Errorf("commit the retry of pg-boss job %s: %w", m.Job.ID, err)}
	}
	return nil
}

// failed is an error inside the transaction: PostgreSQL's own answer
// rolled it back and fails the item; anything else lost the database.
func failed(m replay.Message, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: "pg-boss's database refused the retry: " + pgErr.Message + " (" + pgErr.Code + ")"}
	}
	return &replay.BrokerLostError{Err: fmt.Errorf("job %s on %s: %w", m.Job.ID, m.RoutingKey, err)}
}

// markedBy says whether the marks on a job (the value under MarksKey)
// name item of request.
func markedBy(raw []byte, request, item int64) bool {
	m := marks(raw)
	if m == nil {
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

// ExchangeExists implements replay.Broker: pg-boss has no exchanges; a
// pg-boss target is a queue through the default one.
func (r *Retrier) ExchangeExists(_ context.Context, exchange string) (bool, error) {
	return exchange == "", nil
}

// QueueDepth implements replay.Broker for a queue named as letters name
// it (pgboss://CONNECTION/QUEUE): the jobs a worker's fetch would take
// now, created or retry, not blocked by a flow, whose start_after has
// come. The queue exists when pg-boss knows it (its queue row, which
// createQueue writes).
func (r *Retrier) QueueDepth(ctx context.Context, queue string) (depth int, exists bool, err error) {
	target, err := r.target(queue)
	if err != nil {
		return 0, false, err
	}
	if err := r.pool.QueryRow(ctx, r.ref.sql(queueDepthSQL), target.Queue).Scan(&depth, &exists); err != nil {
		return 0, false, fmt.Errorf("depth of pg-boss queue %s: %w", target.Name(), err)
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

// target is the queue a letter's or a request's name
// (pgboss://CONNECTION/QUEUE) names on this retrier's connection; a queue
// of another connection is refused, never reached.
func (r *Retrier) target(name string) (Ref, error) {
	conn, queue, err := SplitName(name)
	if err != nil {
		return Ref{}, err
	}
	if conn != r.ref.Conn {
		return Ref{}, fmt.Errorf("queue %s is of connection %q, and this replay reaches connection %q", name, conn, r.ref.Conn)
	}
	target := r.ref
	if target.Queue, err = url.PathUnescape(queue); err != nil {
		return Ref{}, fmt.Errorf("queue %s: its name is badly escaped", name)
	}
	if err := checkQueueName(target.Queue); err != nil {
		return Ref{}, fmt.Errorf("queue %s: %w", name, err)
	}
	return target, nil
}

// LoginStanding is the login the retrier writes pg-boss's database as,
// and the ways it holds around pg-boss's own rules (a superuser, the
// owner of the job table): a replay needs only SELECT on SCHEMA.job and
// SCHEMA.queue and UPDATE of the columns retryJobSQL writes
// (docs/pgboss.md).
func (r *Retrier) LoginStanding() (login string, kinds []string) { return r.login, r.standing }
