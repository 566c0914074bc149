package pgboss

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
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
//
// A replay needs only SELECT on SCHEMA.job and SCHEMA.queue and UPDATE of
// the columns retryJobSQL writes (docs/pgboss.md); LoginStanding says when
// the login holds more (a superuser, the owner of the job table).
type Retrier struct {
	*pgjobs.Retries
	pool *pgxpool.Pool
	ref  Ref
	// lock and update are lockJobSQL and retryJobSQL on ref's schema.
	lock, update string
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
	pool, standing, err := pgjobs.Connect(ctx, cfg, ref.jobStore(), check(ref))
	if err != nil {
		return nil, err
	}
	r := &Retrier{pool: pool, ref: ref, lock: ref.sql(lockJobSQL), update: ref.sql(retryJobSQL)}
	r.Retries = pgjobs.NewRetries(pool, ref.jobStore(), standing, opts.Concurrency, r.job)
	return r, nil
}

// uuidText is a uuid as PostgreSQL reads one in its canonical form; a job
// id that is not one names no pg-boss job.
var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// job is the retry of the pg-boss job m names, in the queue its routing
// key names: it is retried only while pg-boss still holds the failure the
// letter captured.
func (r *Retrier) job(m replay.Message) (pgjobs.Retry, error) {
	target, err := r.target(m.RoutingKey)
	if err != nil {
		return pgjobs.Retry{}, pgjobs.Refuse(m, err.Error())
	}
	if !uuidText.MatchString(m.Job.ID) || m.Job.Incarnation == "" {
		return pgjobs.Retry{}, pgjobs.Refuse(m, fmt.Sprintf("job %q, incarnation %q names no pg-boss job", m.Job.ID, m.Job.Incarnation))
	}
	lock := func(ctx context.Context, tx pgx.Tx) ([]byte, string, error) {
		var (
			state       string
			completedOn *time.Time
			marks       []byte
		)
		err := tx.QueryRow(ctx, r.lock, target.Queue, m.Job.ID).Scan(&state, &completedOn, &marks)
		switch {
		case err != nil:
			return nil, "", err
		case state != StateFailed:
			return marks, "state " + state, nil
		case completedOn == nil || Incarnation(*completedOn) != m.Job.Incarnation:
			now := "state " + state
			if completedOn != nil {
				now += " since " + Incarnation(*completedOn) + ": it failed again"
			}
			return marks, now, nil
		}
		return marks, "", nil
	}
	write := func(ctx context.Context, tx pgx.Tx, marks string) error {
		tag, err := tx.Exec(ctx, r.update, target.Queue, m.Job.ID, marks)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "23505":
			return pgjobs.Refuse(m, "pg-boss refused the retry: another waiting job of the queue holds this job's singleton key ("+pgErr.ConstraintName+")")
		case err != nil:
			return err
		case tag.RowsAffected() != 1:
			// The row is locked and was failed: only a broken invariant
			// gets here.
			return pgjobs.Refuse(m, fmt.Sprintf("the retry of pg-boss job %s changed %d rows", m.Job.ID, tag.RowsAffected()))
		}
		return nil
	}
	return pgjobs.Retry{Lock: lock, Write: write}, nil
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
