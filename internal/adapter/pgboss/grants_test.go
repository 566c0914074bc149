package pgboss_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestLeastPrivilegeLogins holds docs/pgboss.md's grants to the driver: a
// capture login with SELECT on pg-boss's job and queue tables alone, and
// a replay login with SELECT on both and UPDATE of the six columns a
// retry writes, on a queue with a partition of its own, which the parent
// table's privileges reach.
func TestLeastPrivilegeLogins(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 0, "partition": true})
	capturer := db.PG.Login(t, "pgboss_capture")
	replayer := db.PG.Login(t, "pgboss_replay")
	c, r := pgx.Identifier{capturer.Name}.Sanitize(), pgx.Identifier{replayer.Name}.Sanitize()
	// Before pgtest drops the logins, which a privilege would hold.
	t.Cleanup(func() {
		for _, l := range []string{c, r} {
			db.Exec(t, "REVOKE ALL ON {job}, {queue} FROM "+l)
			db.Exec(t, "REVOKE ALL ON SCHEMA pgboss FROM "+l)
		}
	})
	for _, grant := range []string{
		"GRANT USAGE ON SCHEMA pgboss TO " + c + ", " + r,
		"GRANT SELECT ON {job}, {queue} TO " + c + ", " + r,
		"GRANT UPDATE (state, retry_limit, completed_on, start_after, keep_until, trace_context) ON {job} TO " + r,
	} {
		db.Exec(t, grant)
	}
	b.FailJobs(reservations(1, 2)...)
	captureRef := pgbosstest.RefFor(t, capturer.URL, "expiry")
	got := capture(t, captureRef, 2)
	if login, standing := openSource(t, captureRef, pgboss.SourceOptions{}).LoginStanding(); login != capturer.Name || len(standing) != 0 {
		t.Errorf("the capture login's standing: %s %v; want none beyond its grants", login, standing)
	}

	rr := openRetrier(t, pgbosstest.RefFor(t, replayer.URL, "expiry"))
	if err := publish(t, rr, replayOf(got[0], 42, 1)); err != nil {
		t.Fatalf("retry as the replay login: %v", err)
	}
	if s := db.Job(t, "expiry", got[0].Message.MessageID); s.State != "retry" {
		t.Errorf("the job is %s after its retry", s.State)
	}
	if _, _, err := rr.QueueDepth(context.Background(), captureRef.Name()); err != nil {
		t.Errorf("QueueDepth as the replay login: %v", err)
	}
	if _, err := pgboss.Topology(context.Background(), captureRef); err != nil {
		t.Errorf("Topology as the capture login: %v", err)
	}

	// The capture login cannot retry: its retry fails the item, nothing
	// changes.
	cr := openRetrier(t, captureRef)
	var failure *replay.PublishFailure
	if err := publish(t, cr, replayOf(got[1], 42, 2)); !errors.As(err, &failure) {
		t.Errorf("a retry as the capture login: %v; want a publish failure", err)
	}
	if s := db.Job(t, "expiry", got[1].Message.MessageID); s.State != "failed" {
		t.Errorf("the job is %s after a refused retry", s.State)
	}
}
