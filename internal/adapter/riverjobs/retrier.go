package riverjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
	"github.com/expiryctl/expiryctl/replay"
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
//
// A replay needs only SELECT and UPDATE on river_job (docs/river.md);
// LoginStanding says when the login holds more (a superuser, the owner of
// river_job).
type Retrier struct {
	*pgjobs.Retries
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	ref    Ref
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
	pool, standing, err := pgjobs.Connect(ctx, cfg, ref.jobStore(), check(ref))
	if err != nil {
		return nil, err
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
	r := &Retrier{pool: pool, client: client, ref: ref}
	r.Retries = pgjobs.NewRetries(pool, ref.jobStore(), standing, opts.Concurrency, r.job)
	return r, nil
}

// job is the retry of the River job m names, on the queue its routing key
// names: it is retried only while River still holds the failure the
// letter captured, in the same queue.
func (r *Retrier) job(m replay.Message) (pgjobs.Retry, error) {
	target, err := r.target(m.RoutingKey)
	if err != nil {
		return pgjobs.Retry{}, pgjobs.Refuse(m, err.Error())
	}
	id, err := strconv.ParseInt(m.Job.ID, 10, 64)
	if err != nil || m.Job.Incarnation == "" {
		return pgjobs.Retry{}, pgjobs.Refuse(m, fmt.Sprintf("job %q, incarnation %q names no River job", m.Job.ID, m.Job.Incarnation))
	}
	lock := func(ctx context.Context, tx pgx.Tx) ([]byte, string, error) {
		var (
			state, queue string
			finalizedAt  *time.Time
			marks        []byte
		)
		err := tx.QueryRow(ctx, `SELECT state::text, queue, finalized_at, metadata -> '`+MarksKey+`'
			FROM river_job WHERE id = $1 FOR UPDATE`, id).Scan(&state, &queue, &finalizedAt, &marks)
		switch {
		case err != nil:
			return nil, "", err
		case queue != target.Queue:
			return marks, "a job of queue " + strconv.Quote(queue), nil
		case state != StateDiscarded && state != StateCancelled:
			return marks, "state " + state, nil
		case finalizedAt == nil || Incarnation(*finalizedAt) != m.Job.Incarnation:
			now := "state " + state
			if finalizedAt != nil {
				now += " since " + Incarnation(*finalizedAt) + ": it failed again"
			}
			return marks, now, nil
		}
		return marks, "", nil
	}
	write := func(ctx context.Context, tx pgx.Tx, marks string) error {
		if _, err := tx.Exec(ctx, `UPDATE river_job SET metadata = jsonb_set(metadata, '{`+MarksKey+`}', $2::jsonb) WHERE id = $1`,
			id, marks); err != nil {
			return err
		}
		_, err := r.client.JobRetryTx(ctx, tx, id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return pgjobs.Refuse(m, "River refused the retry: another live job holds this unique job's key")
		}
		return err
	}
	return pgjobs.Retry{Lock: lock, Write: write}, nil
}

// riverVersion is the River module whose JobRetry this driver calls.
const riverVersion = "v0.51.2"

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
