package pgjobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// openRetries opens retries on the job table whose job func reads a
// message's job id as the table's id, closed when t ends.
func openRetries(t testing.TB, db *jobsDB) *pgjobs.Retries {
	t.Helper()
	cfg := db.config(t)
	pool, standing, err := pgjobs.Connect(context.Background(), cfg, db.store(), noCheck)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	r := pgjobs.NewRetries(pool, db.store(), standing, 2, toyRetry)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// toyRetry retries a failed job of the table by setting it to state
// retry, while it still has the failure the message names; job 0 names
// none, and a body of "unique" breaks a rule of the table's.
func toyRetry(m replay.Message) (pgjobs.Retry, error) {
	if m.Job.ID == "0" {
		return pgjobs.Retry{}, pgjobs.Refuse(m, "job 0 names no toy job")
	}
	return pgjobs.Retry{
		Lock: func(ctx context.Context, tx pgx.Tx) ([]byte, string, error) {
			var (
				state, body string
				at          time.Time
				marks       []byte
			)
			err := tx.QueryRow(ctx, `SELECT state, failed_at, body, marks FROM job WHERE id = $1::bigint FOR UPDATE`, m.Job.ID).Scan(&state, &at, &body, &marks)
			switch {
			case err != nil:
				return nil, "", err
			case state != "failed":
				return marks, "state " + state, nil
			case at.UTC().Format(time.RFC3339Nano) != m.Job.Incarnation:
				return marks, "it failed again", nil
			}
			return marks, "", nil
		},
		Write: func(ctx context.Context, tx pgx.Tx, marks string) error {
			_, err := tx.Exec(ctx, `UPDATE job SET state = 'retry', marks = $2::jsonb,
				body = CASE WHEN body = 'unique' THEN (1 / (length(body) - 6))::text ELSE body END WHERE id = $1::bigint`, m.Job.ID, marks)
			return err
		},
	}, nil
}

// retryOf is the message the runner makes of a captured job for item of
// request.
func retryOf(d deadletter.Delivery, request, item int64) replay.Message {
	return replay.Message{
		Item: item, RoutingKey: d.Message.Queue, System: "toy", Body: d.Message.Body,
		Headers: map[string]any{replay.HeaderReplayRequest: request, replay.HeaderReplayItem: item, replay.HeaderReplayedBy: "carol"},
		Job:     replay.JobRef{ID: d.Message.MessageID, Incarnation: d.Message.Native[deadletter.NativeIncarnation]},
	}
}

func publish(t testing.TB, r *pgjobs.Retries, m replay.Message) error {
	t.Helper()
	p, err := r.Publish(context.Background(), m)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the publish did not settle")
	}
	return p.Outcome()
}

// capture takes the n failed jobs of the table through a poller.
func capture(t testing.TB, db *jobsDB, n int) []deadletter.Delivery {
	t.Helper()
	p := openPoller(t, db, pgjobs.Options{})
	got := receive(t, p, n)
	_ = p.Close()
	return got
}

func (db *jobsDB) row(t testing.TB, id string) (state, marks string, xmin uint32) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(), `SELECT state, coalesce(marks::text, ''), xmin::text::bigint FROM job WHERE id = $1::bigint`, id).
		Scan(&state, &marks, &xmin)
	if err != nil {
		t.Fatal(err)
	}
	return state, marks, xmin
}

// TestRetriesRetryAJobOnce: a publish retries the job and writes the
// replay's marks on it; the same item published again, as a resumed run
// does, is confirmed without a second write; another request's finds
// the job moved on.
func TestRetriesRetryAJobOnce(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now())
	d := capture(t, db, 1)[0]
	r := openRetries(t, db)
	if err := publish(t, r, retryOf(d, 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	state, marks, xmin := db.row(t, d.Message.MessageID)
	if state != "retry" || !strings.Contains(marks, `"x-replay-request": 42`) || !strings.Contains(marks, `"x-replayed-by": "carol"`) {
		t.Errorf("after the retry: state %s, marks %s", state, marks)
	}
	if err := publish(t, r, retryOf(d, 42, 7)); err != nil {
		t.Errorf("publish again: %v", err)
	}
	if _, _, again := db.row(t, d.Message.MessageID); again != xmin {
		t.Errorf("the second publish of the same item wrote the job again (xmin %d, then %d)", xmin, again)
	}
	var moved *replay.JobMovedOnError
	if err := publish(t, r, retryOf(d, 43, 8)); !errors.As(err, &moved) || moved.Now != "state retry" || moved.JobID != d.Message.MessageID {
		t.Errorf("another request's publish: %v; want the job moved on (state retry)", err)
	}
	if login, _ := r.LoginStanding(); login == "" {
		t.Error("LoginStanding names no login")
	}
}

// TestRetriesSkipAJobThatMovedOn: a job deleted, or failed again, since
// the letter captured it is left alone.
func TestRetriesSkipAJobThatMovedOn(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now().Add(-time.Minute))
	db.fail(t, time.Now())
	got := capture(t, db, 2)
	r := openRetries(t, db)
	db.exec(t, "DELETE FROM job WHERE id = $1::bigint", got[0].Message.MessageID)
	db.exec(t, "UPDATE job SET failed_at = failed_at + interval '1 second' WHERE id = $1::bigint", got[1].Message.MessageID)
	for i, now := range []string{"deleted", "it failed again"} {
		var moved *replay.JobMovedOnError
		if err := publish(t, r, retryOf(got[i], 42, 7)); !errors.As(err, &moved) || moved.Now != now {
			t.Errorf("job %s: %v; want it moved on (%s)", got[i].Message.MessageID, err, now)
		}
	}
	if state, _, _ := db.row(t, got[1].Message.MessageID); state != "failed" {
		t.Errorf("a skipped job is %s", state)
	}
}

// TestRetriesRefuse: a message of another system or for an exchange, one
// the driver refuses, and a retry the database refuses each fail their
// item, naming why, and change nothing.
func TestRetriesRefuse(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now())
	d := capture(t, db, 1)[0]
	db.exec(t, "UPDATE job SET body = 'unique'")
	r := openRetries(t, db)
	otherSystem := retryOf(d, 42, 7)
	otherSystem.System = deadletter.SQS
	exchange := retryOf(d, 42, 7)
	exchange.Exchange = "amq.direct"
	noJob := retryOf(d, 42, 7)
	noJob.Job.ID = "0"
	for name, tt := range map[string]struct {
		m    replay.Message
		says string
	}{
		"another system": {otherSystem, "not a Toy job: a Toy replay retries jobs captured from Toy in place"},
		"an exchange":    {exchange, "not a Toy job"},
		"the driver's":   {noJob, "job 0 names no toy job"},
		"the database's": {retryOf(d, 42, 7), "Toy's database refused the retry: division by zero (22012)"},
	} {
		var failure *replay.PublishFailure
		if err := publish(t, r, tt.m); !errors.As(err, &failure) || !strings.Contains(failure.Reason, tt.says) || failure.RoutingKey != d.Message.Queue {
			t.Errorf("%s: %v; want a publish failure saying %q", name, err, tt.says)
		}
	}
	if state, marks, _ := db.row(t, d.Message.MessageID); state != "failed" || marks != "" {
		t.Errorf("after refused publishes the job is %s with marks %q", state, marks)
	}
}

// TestRetriesLoseAStoppedRun: a publish whose run stopped before it had
// a session says the broker was lost, not that the job failed.
func TestRetriesLoseAStoppedRun(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now())
	d := capture(t, db, 1)[0]
	r := openRetries(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := r.Publish(ctx, retryOf(d, 42, 7))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	var lost *replay.BrokerLostError
	if !errors.As(p.Outcome(), &lost) {
		t.Errorf("a publish of a stopped run: %v; want the broker lost", p.Outcome())
	}
}
