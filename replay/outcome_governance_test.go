package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// wantDenied fails unless err is PostgreSQL refusing the privilege.
func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("%s: error %v, want permission denied", what, err)
	}
}

// wantRule fails unless err is the database's refusal by rule.
func wantRule(t *testing.T, what string, err error, rule string) {
	t.Helper()
	r, ok := errors.AsType[*Refusal](DatabaseRefusal(err))
	if !ok || r.Rule != rule {
		t.Errorf("%s: error %v, want a refusal by rule %s", what, err, rule)
	}
}

// TestOutcomePolicyChangesOnlyByFourEyes attacks the outcome query and its
// stop conditions with raw SQL as people: an operator can change neither
// the table nor call the functions that do, and an admin's change is a
// proposal that applies only when a second admin approves it.
func TestOutcomePolicyChangesOnlyByFourEyes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	olga := db.Login(t, "olga", "expiryctl_operator")
	ada := db.Login(t, "ada", "expiryctl_admin")
	adam := db.Login(t, "adam", "expiryctl_admin")
	hostile := `{"outcome_query": "SELECT now(), false", "stop_unsettled_ratio": 1, "stop_conflict_ratio": 1, "outcome_window": "1000 days"}`

	_, err := olga.Pool.Exec(ctx, `UPDATE expiryctl.policy SET outcome_query = 'SELECT now(), false', stop_unsettled_ratio = 1, stop_conflict_ratio = 1`)
	wantDenied(t, "an operator updating the policy table", err)
	_, err = olga.Pool.Exec(ctx, `SELECT * FROM expiryctl.policy_apply($1::jsonb, 'olga')`, hostile)
	wantDenied(t, "an operator calling policy_apply", err)
	_, err = olga.Pool.Exec(ctx, `SELECT * FROM expiryctl.policy_set('olga', $1::jsonb, 'faster')`, hostile)
	wantRule(t, "an operator calling policy_set", err, "role")

	var change int64
	var applied bool
	if err := ada.Pool.QueryRow(ctx, `SELECT change_id, applied FROM expiryctl.policy_set('ada', $1::jsonb, 'watch nothing')`, hostile).Scan(&change, &applied); err != nil {
		t.Fatal(err)
	}
	pol, err := LoadPolicy(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if applied || pol.OutcomeQuery != "" || pol.StopUnsettledRatio != 0.05 || pol.StopConflictRatio != 0.2 || pol.OutcomeWindow != 5*time.Minute {
		t.Fatalf("an admin's proposal applied at once (applied %v): policy %+v", applied, pol)
	}
	_, err = ada.Pool.Exec(ctx, `SELECT expiryctl.policy_review('ada', $1, 'approve', 'self')`, change)
	wantRule(t, "the proposer approving her own change", err, "four-eyes")
	_, err = ada.Pool.Exec(ctx, `SELECT expiryctl.policy_review('someone-else', $1, 'approve', 'as another label')`, change)
	wantRule(t, "the proposer approving under another label", err, "four-eyes")
	if pol, _ = LoadPolicy(ctx, db.Pool); pol.OutcomeQuery != "" {
		t.Fatalf("a refused review changed the policy: %+v", pol)
	}

	if _, err := adam.Pool.Exec(ctx, `SELECT expiryctl.policy_review('adam', $1, 'approve', 'checked')`, change); err != nil {
		t.Fatal(err)
	}
	if pol, _ = LoadPolicy(ctx, db.Pool); pol.OutcomeQuery != "SELECT now(), false" || pol.StopConflictRatio != 1 || pol.OutcomeWindow != 1000*24*time.Hour {
		t.Fatalf("the second admin's approval did not apply the change: %+v", pol)
	}
	_, err = adam.Pool.Exec(ctx, `SELECT * FROM expiryctl.policy_set('adam', '{"stop_conflict_ratio": 2}'::jsonb, 'x')`)
	wantRule(t, "a ratio above 1", policyError(err), "policy-value")
}

// TestOutcomeRowsOnlyFromTheRunner attacks replay_outcomes with raw SQL as
// operators: no one writes the table directly, and replay_outcomes_record
// takes outcomes only for a running request, from the login holding its
// runner lock, for items the run confirmed.
func TestOutcomeRowsOnlyFromTheRunner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRun(t)
	ids := b.seedN(t, 1, 3)
	req := b.approved(t, NewRequest{Rate: 100, Canary: intPtr(0)}, ids)
	olga := b.db.Login(t, "olga", "expiryctl_operator")
	oscar := b.db.Login(t, "oscar", "expiryctl_operator")
	now := time.Now()
	record := func(pool interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, letters []int64) error {
		at := make([]time.Time, len(letters))
		for i := range at {
			at[i] = now
		}
		terminal := make([]*time.Time, len(letters))
		for i := range terminal {
			terminal[i] = &now
		}
		_, err := pool.Exec(ctx, `SELECT expiryctl.replay_outcomes_record($1, $2, $3, $3, $3, $4, $5)`,
			req.ID, letters, at, terminal, make([]bool, len(letters)))
		return err
	}

	_, err := olga.Pool.Exec(ctx, `INSERT INTO expiryctl.replay_outcomes (request_id, dead_letter_id, approval, published_at, confirmed_at, window_ends_at)
		VALUES ($1, $2, 1, now(), now(), now())`, req.ID, ids[0])
	wantDenied(t, "an operator inserting an outcome", err)
	_, err = olga.Pool.Exec(ctx, `UPDATE expiryctl.replay_outcomes SET duplicate = false`)
	wantDenied(t, "an operator updating outcomes", err)
	wantRule(t, "outcomes for an approved request not running", record(olga.Pool, ids[:1]), "approved-to-run")

	// Olga runs it by hand: her session takes the runner lock and starts it.
	conn, err := pgx.Connect(ctx, olga.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT expiryctl.replay_run_acquire($1, 'test')", req.ID); err != nil {
		t.Fatal(err)
	}
	// What a runner hands over after reading the consumers: a worker on a
	// handler version the cohort did not fail under.
	consumers := `{"queues": [{"queue": "reservation-expiry", "consumers": [{"tag": "w-1", "handler_version": "v-next"}]}]}`
	if _, err := conn.Exec(ctx, `SELECT * FROM expiryctl.replay_run_start('olga', $1, $2)`, req.ID, consumers); err != nil {
		t.Fatal(err)
	}
	wantRule(t, "another operator recording outcomes of olga's run", record(oscar.Pool, ids[:1]), "single-runner")
	wantRule(t, "the runner recording outcomes of items never confirmed", record(conn, ids[:1]), "confirmed-items")
	wantRule(t, "outcomes of a letter outside the request", record(conn, []int64{ids[0] + 1000}), "confirmed-items")
	if n := b.count(t, `SELECT count(*) FROM expiryctl.replay_outcomes`); n != 0 {
		t.Fatalf("%d outcome rows written by refused calls", n)
	}

	// Halted, it takes no more outcomes even from its runner.
	if _, err := conn.Exec(ctx, `SELECT expiryctl.replay_run_halt('olga', $1, 'test', '{}', '{}')`, req.ID); err != nil {
		t.Fatal(err)
	}
	wantRule(t, "outcomes for a halted request", record(conn, ids[:1]), "approved-to-run")
}
