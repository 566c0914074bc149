package pgjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/replay"
)

// Retry is one job's retry as a driver does it, in the transaction
// Retries gives it.
type Retry struct {
	// Lock locks the job's row and says what its retry needs: the marks a
	// replay left on the job (as Marks reads them; nil for none), and how
	// the job moved on since the letter captured it: "" while the store
	// still holds that failure, else replay.JobMovedOnError's Now ("state
	// available"). pgx.ErrNoRows says the job is gone.
	Lock func(ctx context.Context, tx pgx.Tx) (marks []byte, moved string, err error)
	// Write retries the locked job and writes the replay's marks (JSON)
	// on it. A *replay.PublishFailure it returns fails the item as it
	// says; any other error is the database's (see Retries.Publish).
	Write func(ctx context.Context, tx pgx.Tx, marks string) error
}

// Retries is the part of a replay.Broker on a job store in PostgreSQL
// that is the same for every one: each publish retries one captured job
// where it is, in one transaction with writing the replay's marks on it,
// at most a concurrency of them at once.
//
// A publish locks the job's row and retries it only while the store
// still holds the failure the letter captured. A job deleted, retried by
// someone else, or failed again since is left alone and its item skipped
// (replay.JobMovedOnError). A job whose marks already name this item of
// this request was retried by an earlier publish of it, whose
// confirmation the run lost, and is confirmed again without a second
// retry: that is what makes a resumed run retry each job once.
type Retries struct {
	pool     *pgxpool.Pool
	db       Database
	standing Standing
	// job is the driver's reading of a message: the retry of the job it
	// names, or a *replay.PublishFailure.
	job func(replay.Message) (Retry, error)
	// retrying bounds the transactions in flight.
	retrying chan struct{}
	wg       sync.WaitGroup
}

// NewRetries runs the retries on pool, concurrency of them at once, each
// on a session of its own, and closes pool at Close. job reads a message
// of db's system into the retry of the job it names, or refuses it
// (Refuse); standing is the pool's login's.
func NewRetries(pool *pgxpool.Pool, db Database, standing Standing, concurrency int, job func(replay.Message) (Retry, error)) *Retries {
	return &Retries{pool: pool, db: db, standing: standing, job: job, retrying: make(chan struct{}, concurrency)}
}

// Refuse is the failure of m's item for reason, without a change to any
// job.
func Refuse(m replay.Message, reason string) error {
	return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
}

// Publish implements replay.Broker: it returns at once, and the Pending
// settles once the retry committed (nil), was refused for good
// (*replay.PublishFailure), found the job moved on (*replay.JobMovedOnError)
// or lost the database, when nobody knows whether it committed
// (*replay.BrokerLostError; the resumed run finds the marks if it did).
func (r *Retries) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
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

func (r *Retries) retry(ctx context.Context, m replay.Message) error {
	// An unset system is taken for the store's: the routing key, a
	// river:// or pgboss:// name, says it already.
	if (m.System != r.db.System && m.System != "") || m.Exchange != "" {
		return Refuse(m, fmt.Sprintf("not a %s job: a %[1]s replay retries jobs captured from %[1]s in place", r.db.Title))
	}
	job, err := r.job(m)
	if err != nil {
		return err
	}
	marks, err := json.Marshal(m.Headers)
	if err != nil {
		return Refuse(m, fmt.Sprintf("the replay's marks do not encode as JSON: %v", err))
	}
	request, _ := WholeNumber(m.Headers[replay.HeaderReplayRequest])

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return &replay.BrokerLostError{Err: r.db.errorf(err)}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	old, moved, err := job.Lock(ctx, tx)
	if errors.Is(err, pgx.ErrNoRows) {
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "deleted"}
	}
	if err != nil {
		return r.failed(m, err)
	}
	if request != 0 && MarkedBy(old, request, m.Item) {
		return nil
	}
	if moved != "" {
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: moved}
	}
	if err := job.Write(ctx, tx, string(marks)); err != nil {
		var refused *replay.PublishFailure
		if errors.As(err, &refused) {
			return err
		}
		return r.failed(m, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// A commit whose answer was lost may have committed: the resumed
		// run finds the marks and does not retry again.
		return &replay.BrokerLostError{Err: fmt.Errorf("commit the retry of %s job %s: %w", r.db.Title, m.Job.ID, err)}
	}
	return nil
}

// failed is an error inside the transaction: PostgreSQL's own answer
// rolled it back and fails the item; anything else lost the database.
func (r *Retries) failed(m replay.Message, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return Refuse(m, r.db.Title+"'s database refused the retry: "+pgErr.Message+" ("+pgErr.Code+")")
	}
	return &replay.BrokerLostError{Err: fmt.Errorf("job %s on %s: %w", m.Job.ID, m.RoutingKey, err)}
}

// Close waits for the retries in flight to settle and releases the
// connections.
func (r *Retries) Close() error {
	r.wg.Wait()
	r.pool.Close()
	return nil
}

// LoginStanding is the login the retries write the job store as, and the
// ways it holds around the store's own rules (a superuser, the owner of
// the job table), which a replay does not need.
func (r *Retries) LoginStanding() (login string, kinds []string) {
	return r.standing.Login, r.standing.Kinds
}

// retrying is a retry on its way (a replay.Pending).
type retrying struct {
	done chan struct{}
	err  error
}

func (p *retrying) Done() <-chan struct{} { return p.done }
func (p *retrying) Outcome() error        { return p.err }
