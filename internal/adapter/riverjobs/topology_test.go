package riverjobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

// TestTopologyCountsTheQueuesJobsByState: the summary's live states of a
// River queue are its jobs, by state, of that queue alone.
func TestTopologyCountsTheQueuesJobsByState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newRiverDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := client.Insert(ctx, expiryArgs{ReservationID: "r-a"}, &river.InsertOpts{Queue: "expiry"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Insert(ctx, expiryArgs{ReservationID: "r-s"}, &river.InsertOpts{Queue: "expiry", ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Insert(ctx, expiryArgs{ReservationID: "r-o"}, &river.InsertOpts{Queue: "other"}); err != nil {
		t.Fatal(err)
	}
	db.seed(t, failedJob{})
	db.seed(t, failedJob{})
	db.seed(t, failedJob{State: "cancelled"})

	report, err := riverjobs.Topology(ctx, db.ref(t, "expiry"))
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	s := report.States()
	if s.Ready != 3 || s.InFlight != 0 || s.Scheduled != 1 || s.Isolated != 2 {
		t.Errorf("states %+v; want 3 ready, 1 scheduled, 2 discarded (the cancelled one is not captured)", s)
	}
	for _, q := range report.Queues {
		if q.Role == deadletter.RoleWork && q.Name != db.ref(t, "expiry").Name() {
			t.Errorf("the work queue is named %q", q.Name)
		}
	}
	with, err := riverjobs.Topology(ctx, db.ref(t, "expiry", "states=discarded,cancelled"))
	if err != nil || with.States().Isolated != 3 {
		t.Errorf("with cancelled jobs captured: %+v, %v; want 3 isolated", with.States(), err)
	}
}

// TestTopologyAgesAndEveryStateOfWork: each state of a River queue counts
// once: available jobs and retryable or scheduled ones already due are
// ready, the oldest of them giving the work queue's head age (since it
// became due); running ones are in flight; retryable, scheduled and
// pending ones not yet due are scheduled; discarded ones are isolated,
// the oldest giving the dead-letter head age (since River gave up);
// completed ones and other queues' jobs are not counted.
func TestTopologyAgesAndEveryStateOfWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newRiverDB(t)
	exec(t, db, `INSERT INTO river_job (state, max_attempts, args, kind, queue, scheduled_at, finalized_at) VALUES
		('available', 5, '{}', 'k', 'expiry', now() - interval '90 seconds', NULL),
		('available', 5, '{}', 'k', 'expiry', now() - interval '10 seconds', NULL),
		('retryable', 5, '{}', 'k', 'expiry', now() - interval '30 seconds', NULL),
		('scheduled', 5, '{}', 'k', 'expiry', now() - interval '20 seconds', NULL),
		('retryable', 5, '{}', 'k', 'expiry', now() + interval '1 hour', NULL),
		('scheduled', 5, '{}', 'k', 'expiry', now() + interval '1 hour', NULL),
		('pending', 5, '{}', 'k', 'expiry', now() - interval '1 hour', NULL),
		('running', 5, '{}', 'k', 'expiry', now() - interval '5 seconds', NULL),
		('running', 5, '{}', 'k', 'expiry', now() - interval '5 seconds', NULL),
		('completed', 5, '{}', 'k', 'expiry', now() - interval '3 hours', now() - interval '3 hours'),
		('available', 5, '{}', 'k', 'other', now() - interval '5 hours', NULL)`)
	db.seed(t, failedJob{FinalizedAt: time.Now().Add(-2 * time.Hour)})
	db.seed(t, failedJob{FinalizedAt: time.Now().Add(-time.Minute)})

	report, err := riverjobs.Topology(ctx, db.ref(t, "expiry"))
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	s := report.States()
	if s.Ready != 4 || s.InFlight != 2 || s.Scheduled != 3 || s.Isolated != 2 || s.Consumers != 0 {
		t.Errorf("states %+v; want 4 ready (2 available, 2 due), 2 running, 3 scheduled (2 not due, 1 pending), 2 discarded", s)
	}
	near := func(what string, got *time.Duration, want time.Duration) {
		t.Helper()
		if got == nil || *got < want || *got > want+30*time.Second {
			t.Errorf("%s head age %v; want %s (and less than 30 s more)", what, got, want)
		}
	}
	near("ready", s.ReadyHeadAge, 90*time.Second)
	near("isolated", s.IsolatedHeadAge, 2*time.Hour)
	if s.ReadyHeadAgeEstimated || s.IsolatedHeadAgeEstimated {
		t.Error("a River head age is read, not estimated")
	}
	for _, q := range report.Queues {
		if q.PublishRate != nil || q.DeliverRate != nil || q.AckRate != nil {
			t.Errorf("queue %s shows rates River does not keep", q.Name)
		}
	}

	// A queue River knows with nothing in it: zeros and no ages.
	db.worked(t, "idle")
	idle, err := riverjobs.Topology(ctx, db.ref(t, "idle"))
	if err != nil || idle.Unavailable != "" {
		t.Fatalf("Topology of an idle queue: %+v, %v", idle, err)
	}
	if s := idle.States(); s.Ready+s.InFlight+s.Scheduled+s.Isolated != 0 || s.ReadyHeadAge != nil || s.IsolatedHeadAge != nil {
		t.Errorf("an idle queue's states %+v", s)
	}
}

// TestTopologyOfAnUnreachableDatabaseIsUnavailable: no error, a report
// that says what is missing.
func TestTopologyOfAnUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ref := refFor(t, "postgres://nobody@127.0.0.1:1/river", "expiry", "connect_timeout=2")
	report, err := riverjobs.Topology(context.Background(), ref)
	if err != nil || report.Unavailable == "" || len(report.Queues) != 0 || !strings.Contains(report.Unavailable, ref.Server()) {
		t.Errorf("Topology of a database nobody answers for: %+v, %v; want Unavailable naming %s and no error", report, err, ref.Server())
	}
}
