package pgboss_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// TestTopologyCountsTheQueuesJobsByState: the summary's live states of a
// pg-boss queue are its jobs, by state, of that queue alone, as a real
// pg-boss left them.
func TestTopologyCountsTheQueuesJobsByState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.FailJobs(reservations(1, 2)...)                                                          // failed
	b.FailJobsWith(map[string]any{"retryLimit": 1, "retryDelay": 3600}, reservations(3, 1)...) // retry, an hour away
	b.SendJobs(nil, reservations(4, 4)...)                                                     // created, due
	b.Fetch(1)                                                                                 // one of them, now active
	b.SendJobs(map[string]any{"startAfter": 3600}, reservations(8, 1)...)                      // created, deferred
	other := db.Start(t, "other", nil)
	other.FailJobs(reservations(9, 1)...)
	// Work done is not counted.
	completed := b.SendJobs(nil, reservations(10, 1)...)[0]
	db.Exec(t, `UPDATE {job} SET state = 'completed', completed_on = now() WHERE name = 'expiry' AND id = $1::uuid`, completed)
	db.Exec(t, `UPDATE {job} SET start_after = now() - interval '1 minute' WHERE name = 'expiry' AND state = 'created' AND start_after <= now()`)
	db.Exec(t, `UPDATE {job} SET completed_on = now() - interval '1 hour' WHERE name = 'expiry' AND state = 'failed'`)

	ref := db.Ref(t, "expiry")
	report, err := pgboss.Topology(ctx, ref)
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	s := report.States()
	if s.Ready != 3 || s.InFlight != 1 || s.Scheduled != 2 || s.Isolated != 2 {
		t.Errorf("states %+v; want 3 ready, 1 active, 2 scheduled (deferred and retrying), 2 failed", s)
	}
	if s.ReadyHeadAge == nil || *s.ReadyHeadAge < time.Minute || *s.ReadyHeadAge > time.Hour {
		t.Errorf("the ready head's age %v; want the minute since its start_after", s.ReadyHeadAge)
	}
	if s.IsolatedHeadAge == nil || *s.IsolatedHeadAge < time.Hour || *s.IsolatedHeadAge > 2*time.Hour {
		t.Errorf("the failed head's age %v; want the hour since it failed", s.IsolatedHeadAge)
	}
	for _, q := range report.Queues {
		if !strings.HasPrefix(q.Name, ref.Name()) {
			t.Errorf("queue %q is not named after %s", q.Name, ref.Name())
		}
		if q.Role == deadletter.RoleWork && q.Name != ref.Name() {
			t.Errorf("the work queue is named %q", q.Name)
		}
	}
}

// TestTopologyOfAnEmptyQueueAndAnUnreachableDatabase: a queue pg-boss
// knows with no job is all zeros and no ages; a database that does not
// answer is a report that says so, not an error.
func TestTopologyOfAnEmptyQueueAndAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgbosstest.New(t, "expiry", nil)
	report, err := pgboss.Topology(ctx, db.Ref(t, "expiry"))
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	if s := report.States(); s.Ready != 0 || s.InFlight != 0 || s.Scheduled != 0 || s.Isolated != 0 || s.ReadyHeadAge != nil || s.IsolatedHeadAge != nil {
		t.Errorf("states of an empty queue %+v", s)
	}
	dead := pgbosstest.RefFor(t, "postgres://postgres@127.0.0.1:1/nowhere", "expiry", "connect_timeout=2")
	report, err = pgboss.Topology(ctx, dead)
	if err != nil || !strings.Contains(report.Unavailable, "the pg-boss database") {
		t.Errorf("Topology of a database that does not answer: %+v, %v; want Unavailable said", report, err)
	}
}
