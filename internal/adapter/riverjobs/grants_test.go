package riverjobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// TestLeastPrivilegeLogins holds docs/river.md's grants to the driver: a
// capture login with SELECT on river_job alone, and a replay login with
// SELECT on river_job and river_queue and UPDATE of the five columns
// River's JobRetry and the marks write.
func TestLeastPrivilegeLogins(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	capturer := db.PG.Login(t, "river_capture")
	replayer := db.PG.Login(t, "river_replay")
	// Before pgtest drops the logins, which a privilege would hold.
	t.Cleanup(func() {
		for _, l := range []string{capturer.Name, replayer.Name} {
			exec(t, db, "REVOKE ALL ON river_job, river_queue FROM "+pgx.Identifier{l}.Sanitize())
		}
	})
	for _, grant := range []string{
		"GRANT SELECT ON river_job TO " + pgx.Identifier{capturer.Name}.Sanitize(),
		"GRANT SELECT ON river_job, river_queue TO " + pgx.Identifier{replayer.Name}.Sanitize(),
		"GRANT UPDATE (state, max_attempts, finalized_at, scheduled_at, metadata) ON river_job TO " + pgx.Identifier{replayer.Name}.Sanitize(),
	} {
		exec(t, db, grant)
	}
	db.seed(t, failedJob{FinalizedAt: time.Now().Add(-time.Minute)})
	captureRef := refFor(t, capturer.URL, "expiry")
	d := capture(t, captureRef, 1)[0]

	r := openRetrier(t, refFor(t, replayer.URL, "expiry"))
	if err := publish(t, r, replayOf(d, 42, 1)); err != nil {
		t.Fatalf("retry as the replay login: %v", err)
	}
	if s := db.job(t, d.Message.MessageID); s.State != "available" {
		t.Errorf("the job is %s after its retry", s.State)
	}
	if _, _, err := r.QueueDepth(context.Background(), captureRef.Name()); err != nil {
		t.Errorf("QueueDepth as the replay login: %v", err)
	}

	// The capture login cannot retry: its retry fails the item, nothing
	// changes.
	db.seed(t, failedJob{})
	second := capture(t, captureRef, 1)[0]
	cr, err := riverjobs.OpenRetrier(context.Background(), captureRef, riverjobs.RetrierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	var failure *replay.PublishFailure
	if err := publish(t, cr, replayOf(second, 42, 2)); !errors.As(err, &failure) {
		t.Errorf("a retry as the capture login: %v; want a publish failure", err)
	}
}
