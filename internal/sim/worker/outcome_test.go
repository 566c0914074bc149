package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
)

// outcomeOf runs worker.OutcomeQuery as a run would, with its four
// parameters, and returns its one row.
func outcomeOf(t *testing.T, pool *pgxpool.Pool, job worker.Job, published time.Time) (terminalAt *time.Time, duplicate, found bool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT q.* FROM (SELECT $1::text, $2::text, $3::bigint, $4::timestamptz)
		AS a (reservation_id, idempotency_key, expected_version, published_at), LATERAL (`+worker.OutcomeQuery+`) AS q`,
		job.ReservationID, job.IdempotencyKey, job.ExpectedVersion, published)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, false
	}
	if err := rows.Scan(&terminalAt, &duplicate); err != nil {
		t.Fatal(err)
	}
	return terminalAt, duplicate, true
}

// TestOutcomeQueryReadsTheTransitionAndItsDuplicates holds the model to
// what the demo's outcome query needs: when a reservation expired, and
// whether a job's key had been applied before a replay of it was sent.
func TestOutcomeQueryReadsTheTransitionAndItsDuplicates(t *testing.T) {
	t.Parallel()
	db := newSchemaDB(t)
	ctx := context.Background()
	seedReservation(t, db.Pool, reservation{id: "r-1", status: "held", version: 3})
	seedReservation(t, db.Pool, reservation{id: "r-2", status: "paid", version: 3})
	seedReservation(t, db.Pool, reservation{id: "r-3", status: "held", version: 5})
	job, paid, conflict := jobFor("r-1", 3), jobFor("r-2", 3), jobFor("r-3", 3)

	before := time.Now()
	if at, _, found := outcomeOf(t, db.Pool, job, before); !found || at != nil {
		t.Fatalf("before the job: terminal_at %v (row %v), want a row saying not terminal", at, found)
	}
	if out, err := worker.ExpireOnce(ctx, db.Pool, job); err != nil || out != worker.Expired {
		t.Fatalf("ExpireOnce = %v, %v", out, err)
	}
	at, dup, _ := outcomeOf(t, db.Pool, job, before)
	if at == nil || at.Before(before.Add(-time.Second)) || dup {
		t.Errorf("after expiring: terminal_at %v duplicate %v, want the expiry's time and no duplicate", at, dup)
	}

	// The same key again, published after it was applied: a duplicate.
	again := time.Now()
	if out, err := worker.ExpireOnce(ctx, db.Pool, job); err != nil || out != worker.Duplicate {
		t.Fatalf("ExpireOnce again = %v, %v", out, err)
	}
	if at2, dup, _ := outcomeOf(t, db.Pool, job, again); at2 == nil || !at2.Equal(*at) || !dup {
		t.Errorf("the replayed duplicate: terminal_at %v duplicate %v, want the first expiry's time and a duplicate", at2, dup)
	}

	if out, err := worker.ExpireOnce(ctx, db.Pool, paid); err != nil || out != worker.Skipped {
		t.Fatalf("ExpireOnce of the paid one = %v, %v", out, err)
	}
	if at, dup, _ := outcomeOf(t, db.Pool, paid, before); at == nil || dup {
		t.Errorf("a paid reservation whose job was handled: terminal_at %v duplicate %v, want terminal, no duplicate", at, dup)
	}

	if _, err := worker.ExpireOnce(ctx, db.Pool, conflict); err == nil {
		t.Fatal("a version conflict was not refused")
	}
	if at, _, _ := outcomeOf(t, db.Pool, conflict, before); at != nil {
		t.Errorf("a held reservation the job could not expire: terminal_at %v, want not terminal", at)
	}
}

// eligibleOf runs the reservations template's eligibility query as a run
// does (its three parameters, typed), and returns its row.
func eligibleOf(t *testing.T, pool *pgxpool.Pool, job worker.Job) (eligible bool, reason *string, found bool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT q.* FROM (SELECT $1::text, $2::text, $3::bigint)
		AS a (reservation_id, idempotency_key, expected_version), LATERAL (`+replay.ReservationsEligibilityQuery(worker.Schema)+`) AS q`,
		job.ReservationID, job.IdempotencyKey, job.ExpectedVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		return false, nil, false
	}
	if err := rows.Scan(&eligible, &reason); err != nil {
		t.Fatal(err)
	}
	return eligible, reason, true
}

// TestEligibilityTemplateReadsTheModel holds the reservations template's
// eligibility query to the model: a job is eligible while its reservation
// is held at the job's version, whenever the hold is due; a reservation
// paid, expired or at another version is not, with the reason; one that
// does not exist gives no row, which a run reads as not eligible.
func TestEligibilityTemplateReadsTheModel(t *testing.T) {
	t.Parallel()
	db := newSchemaDB(t)
	seedReservation(t, db.Pool, reservation{id: "r-held", status: "held", version: 3})
	seedReservation(t, db.Pool, reservation{id: "r-later", status: "held", version: 3, dueIn: time.Hour})
	seedReservation(t, db.Pool, reservation{id: "r-paid", status: "paid", version: 3})
	seedReservation(t, db.Pool, reservation{id: "r-moved", status: "held", version: 4})
	for _, c := range []struct {
		job      worker.Job
		eligible bool
		reason   string
	}{
		{jobFor("r-held", 3), true, ""},
		{jobFor("r-later", 3), true, ""},
		{jobFor("r-paid", 3), false, "the reservation is paid, no longer held"},
		{jobFor("r-moved", 3), false, "the reservation is at version 4, the job was for version 3"},
	} {
		eligible, reason, found := eligibleOf(t, db.Pool, c.job)
		got := ""
		if reason != nil {
			got = *reason
		}
		if !found || eligible != c.eligible || got != c.reason {
			t.Errorf("%s v%d: eligible %v (%q, row %v), want %v (%q)", c.job.ReservationID, c.job.ExpectedVersion, eligible, got, found, c.eligible, c.reason)
		}
	}
	if _, _, found := eligibleOf(t, db.Pool, jobFor("r-gone", 3)); found {
		t.Error("a reservation that does not exist gave a row")
	}
}
