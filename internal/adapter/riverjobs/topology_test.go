package riverjobs_test

import (
	"context"
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
