package pgjobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// TestPollerSessionsCannotWriteEvenIfTheLoginCould: the test's login is
// a superuser; the poller's sessions themselves refuse a write.
func TestPollerSessionsCannotWriteEvenIfTheLoginCould(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now())
	p := openPoller(t, db, pgjobs.Options{})
	receive(t, p, 1)
	err := pgjobs.PollerExec(p, "UPDATE job SET state = 'retry'")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("a write on the poller's session: %v; want read_only_sql_transaction (25006)", err)
	}
	if login, standing := p.LoginStanding(); login == "" || !strings.Contains(strings.Join(standing, ","), "superuser") {
		t.Errorf("LoginStanding = %q, %v; want the superuser said", login, standing)
	}
}

// TestPollerMarksAJobDeliveredBeforeHandingItOn: a consumer that has
// taken the last job and asks Ready at once finds nothing left. A poller
// that marked the job only after the hand-off counted it again now and
// then (CI saw Ready = 1): each round here is one more chance of that.
func TestPollerMarksAJobDeliveredBeforeHandingItOn(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	db.fail(t, time.Now().Add(-time.Minute))
	db.fail(t, time.Now())
	for range 50 {
		p := openPoller(t, db, pgjobs.Options{})
		receive(t, p, 2)
		if n := ready(t, p); n != 0 {
			t.Fatalf("Ready at once after the last delivery = %d, want 0", n)
		}
		_ = p.Close()
	}
}

// TestPollerTakesTheMarkBackWhenClosedBeforeTheHandOff: a job marked
// delivered whose hand-off the poller's closing cut short was never
// delivered, and Ready after Close counts it.
func TestPollerTakesTheMarkBackWhenClosedBeforeTheHandOff(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	base := time.Now().Add(-time.Minute)
	first := db.fail(t, base)
	for i := 1; i < 3; i++ {
		db.fail(t, base.Add(time.Duration(i)*time.Second))
	}
	// A page of one is a hand-off buffer of one: the first job waits
	// there, nobody takes it, and the second is marked and held.
	p := openPoller(t, db, pgjobs.Options{Page: 1})
	deadline := time.Now().Add(20 * time.Second)
	for ready(t, p) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the poller never marked the second job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for d := range p.Deliveries() {
		got = append(got, d.Message.MessageID)
	}
	if len(got) != 1 || got[0] != fmt.Sprint(first) {
		t.Errorf("delivered %v, want only job %d", got, first)
	}
	if n := ready(t, p); n != 2 {
		t.Errorf("Ready after Close = %d, want 2: the job whose hand-off was cut short, and the third", n)
	}
}

func TestPollerPrefetchBoundsWhatIsHeld(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	base := time.Now().Add(-time.Hour)
	for i := range 25 {
		db.fail(t, base.Add(time.Duration(i)*time.Millisecond))
	}
	p := openPoller(t, db, pgjobs.Options{Prefetch: 10, Poll: 50 * time.Millisecond})
	got := receive(t, p, 10)
	quiet(t, p, 500*time.Millisecond)
	if n, err := p.Ready(); err != nil || n != 15 {
		t.Errorf("Ready = %d, %v; want 15", n, err)
	}
	if err := p.Acknowledge(got[4].Tag); err != nil {
		t.Fatal(err)
	}
	receive(t, p, 5)
	quiet(t, p, 300*time.Millisecond)
	// A tag beyond the last handed out acknowledges what was handed out.
	if err := p.Acknowledge(got[9].Tag + 5); err != nil {
		t.Fatal(err)
	}
	receive(t, p, 10)
	if n, err := p.Ready(); err != nil || n != 0 {
		t.Errorf("Ready = %d, %v; want 0", n, err)
	}
}

// TestPollerFollowsAndLooksBack: a following poller delivers jobs that
// fail after it opened, and a job whose failure committed after a later
// one's, behind its newest delivery within the lookback, once.
func TestPollerFollowsAndLooksBack(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	now := time.Now()
	p := openPoller(t, db, pgjobs.Options{Lookback: 10 * time.Second})
	ack := func(ds []deadletter.Delivery) {
		t.Helper()
		if err := p.Acknowledge(ds[len(ds)-1].Tag); err != nil {
			t.Fatal(err)
		}
	}
	for _, at := range []time.Time{now.Add(-time.Minute), now, now.Add(-3 * time.Second)} {
		id := db.fail(t, at)
		got := receive(t, p, 1)
		ack(got)
		if got[0].Message.MessageID != fmt.Sprint(id) {
			t.Fatalf("delivered job %s, want %d (failed at %s)", got[0].Message.MessageID, id, at)
		}
	}
	// Every poll reads the window again; nothing comes twice.
	quiet(t, p, time.Second)
	if n := ready(t, p); n != 0 {
		t.Errorf("Ready = %d, want 0", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ready(t, p); n != 0 {
		t.Errorf("Ready after Close = %d, want 0", n)
	}
}

// TestPollerEndsOnAnAnswerNoRetryChanges: a job table gone under the
// poller ends its deliveries at once, saying why, rather than after the
// reconnect's minute.
func TestPollerEndsOnAnAnswerNoRetryChanges(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	p := openPoller(t, db, pgjobs.Options{})
	db.exec(t, "DROP TABLE job")
	select {
	case _, ok := <-p.Deliveries():
		if ok {
			t.Fatal("a delivery from a dropped table")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the deliveries did not end")
	}
	var pgErr *pgconn.PgError
	if err := p.Err(); !errors.As(err, &pgErr) || pgErr.Code != "42P01" || !strings.HasPrefix(err.Error(), "read Toy queue toy://jobs/expiry: ") {
		t.Errorf("Err = %v; want the read of the queue and undefined_table", err)
	}
}

// TestOpenPollerRunsTheDriversCheck: a check's refusal is OpenPoller's,
// and a pool that cannot be opened names the database.
func TestOpenPollerRunsTheDriversCheck(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t)
	refused := errors.New("no such queue")
	_, err := pgjobs.OpenPoller(context.Background(), db.config(t), db.store(),
		func(context.Context, *pgxpool.Pool) error { return refused }, queue, pgjobs.Options{})
	if !errors.Is(err, refused) {
		t.Errorf("OpenPoller = %v; want the check's refusal", err)
	}
}
