package replay_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// govBundle is a migrated database with letters and a policy naming bob and
// carol as approvers.
type govBundle struct {
	db      *pgtest.Database
	pool    *pgxpool.Pool
	people  *pgtest.People
	letters []int64
}

func setupGovernance(t *testing.T, letters int) *govBundle {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	batch := make([]deadletter.Letter, letters)
	for i := range batch {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":1,"hold_until":"2026-11-30T12:00:00Z","idempotency_key":"expire:r-%d:v1"}`, i, i)
		batch[i] = deadletter.Letter{
			Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-%d:v1", i), MessageID: fmt.Sprintf("m-%d", i),
			ReservationID: fmt.Sprintf("r-%d", i), IdempotencyKey: fmt.Sprintf("expire:r-%d:v1", i),
			SourceQueue: "q.dlq", OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
			Category: deadletter.TransientExhausted, ErrorClass: "db_timeout", Headers: []byte(`{}`),
			Payload: body, PayloadHash: sha256.Sum256(body),
			DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
		}
	}
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { _, err := deadletter.Insert(ctx, tx, batch); return err }); err != nil {
		t.Fatal(err)
	}
	people := db.People(t)
	if _, err := replay.SetPolicy(ctx, db.Pool, "admin", map[string]any{"approvers": []string{people.Get("bob").Name, people.Get("carol").Name}}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, "SELECT id FROM expiryctl.dead_letters ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return &govBundle{db: db, pool: db.Pool, people: people, letters: ids}
}

// as acts as the person named actor: their own login, labelled actor.
func (b *govBundle) as(actor string) *replay.Service {
	return &replay.Service{Pool: b.people.Get(actor).Pool, Actor: actor}
}

func (b *govBundle) request(t *testing.T, actor string, ids ...int64) replay.Request {
	t.Helper()
	created, err := b.as(actor).Create(context.Background(), replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: ids}, Why: "INC-1"})
	if err != nil {
		t.Fatal(err)
	}
	return created.Request
}

// wantRefusal asserts err is a governance refusal by rule.
func wantRefusal(t *testing.T, err error, rule string) {
	t.Helper()
	var refusal *replay.Refusal
	if !errors.As(err, &refusal) {
		t.Fatalf("error = %v, want a refusal by rule %s", err, rule)
	}
	if refusal.Rule != rule {
		t.Fatalf("refused by rule %s (%s), want rule %s", refusal.Rule, refusal.Message, rule)
	}
}

// asDatabaseRefusal runs sql directly, as a second client that skips
// expiryctl's Go checks would, and returns the database's refusal.
func (b *govBundle) asDatabaseRefusal(t *testing.T, sql string, args ...any) error {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	if err == nil {
		t.Fatalf("the database accepted %q", sql)
	}
	return replay.DatabaseRefusal(err)
}

func TestSelfApprovalIsRefused(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	req := b.request(t, "bob", b.letters[0])
	_, err := b.as("bob").Approve(context.Background(), req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
	wantRefusal(t, err, "four-eyes")
	// And by the database itself, for a client that skips the Go check.
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob' WHERE id = $1`, req.ID), "four-eyes")
	assertAudited(t, b.pool, "replay.approve", "refused")
}

func TestApproverMustBeInPolicy(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	req := b.request(t, "alice", b.letters[0])
	_, err := b.as("mallory").Approve(context.Background(), req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
	wantRefusal(t, err, "approvers")
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'mallory' WHERE id = $1`, req.ID), "approvers")
}

func TestExpiredRequestIsRefused(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	if _, err := replay.SetPolicy(ctx, b.pool, "admin", map[string]any{"approval_ttl": mustInterval(t, "20ms")}); err != nil {
		t.Fatal(err)
	}
	req := b.request(t, "alice", b.letters[0])
	time.Sleep(50 * time.Millisecond)
	_, err := b.as("bob").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
	wantRefusal(t, err, "approval-ttl")
	got, err := replay.Get(ctx, b.pool, req.ID)
	if err != nil || got.Status != replay.StatusExpired {
		t.Fatalf("status after a refused late approval = %s (%v), want expired", got.Status, err)
	}
	// Its letter is free again.
	b.request(t, "alice", b.letters[0])
}

func TestAlreadyReviewedIsRefused(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	req := b.request(t, "alice", b.letters[0])
	if _, err := b.as("bob").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	_, err := b.as("carol").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
	wantRefusal(t, err, "single-review")
	_, err = b.as("carol").Reject(ctx, req.ID, replay.ReviewOptions{Why: "no"})
	wantRefusal(t, err, "single-review")
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET reviewed_by = 'carol' WHERE id = $1`, req.ID), "single-review")
}

func TestChangedCohortIsRefused(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]string{
		"redacted":  `UPDATE expiryctl.dead_letters SET redacted_at = now(), payload = '' WHERE id = $1`,
		"discarded": `UPDATE expiryctl.dead_letter_states SET status = 'discarded' WHERE dead_letter_id = $1`,
		"re-ingested": `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category, payload,
			payload_sha256, payload_size, dead_lettered_at, previous_id)
			SELECT sha256(fingerprint), job_key, source_queue, reason_category, payload, payload_sha256, payload_size, now(), id
			FROM expiryctl.dead_letters WHERE id = $1`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupGovernance(t, 3)
			ctx := context.Background()
			req := b.request(t, "alice", b.letters[0], b.letters[1])
			if _, err := b.pool.Exec(ctx, change, b.letters[1]); err != nil {
				t.Fatal(err)
			}
			_, err := b.as("bob").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
			wantRefusal(t, err, "cohort-frozen")
		})
	}
}

func TestPolicyLimitsAreEnforced(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 5)
	ctx := context.Background()
	if _, err := replay.SetPolicy(ctx, b.pool, "admin", map[string]any{"max_cohort": 2, "max_rate": 10.0}); err != nil {
		t.Fatal(err)
	}
	_, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:3]}, Why: "x"})
	wantRefusal(t, err, "max-cohort")
	_, err = b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{Filter: deadletter.Filter{}, Max: 3}, Why: "x"})
	wantRefusal(t, err, "max-cohort")
	_, err = b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:1]}, Rate: 11, Why: "x"})
	wantRefusal(t, err, "max-rate")
	_, err = b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:1]}, Rate: -1, Why: "x"})
	wantRefusal(t, err, "max-rate")
	// A rate of 0 would never send; only NULL asks for the policy maximum.
	for _, rate := range []string{"0", "-0.5"} {
		wantRefusal(t, b.asDatabaseRefusal(t, `SELECT expiryctl.replay_request_create('alice', 'replay', jsonb_build_object('ids', jsonb_build_array($1::bigint)), `+rate+`, NULL, NULL, NULL, 'x', false, false)`, b.letters[0]), "max-rate")
	}
	// The database holds the same limits for a client that skips the Go checks.
	wantRefusal(t, b.asDatabaseRefusal(t, `INSERT INTO expiryctl.replay_requests (kind, item_count, cohort_hash, rate,
		stop_failure_ratio, stop_queue_depth, stop_redead_ratio, canary_window, why, requested_by, expires_at)
		VALUES ('replay', 1, '\x00', 500, 0, 1, 0, '1s', 'x', 'alice', now() + interval '1h')`), "max-rate")
}

func TestLetterJoinsOneOpenRequest(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	first := b.request(t, "alice", b.letters[0])
	_, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:2]}, Why: "x"})
	wantRefusal(t, err, "one-open-request")
	// A filter leaves it out and takes the free letters.
	created, err := b.as("dave").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{Max: 10}, Why: "x"})
	if err != nil || created.Request.Items != 2 {
		t.Fatalf("filter request: %v, %d items; want the 2 free letters", err, created.Request.Items)
	}
	// The refusal names the letters in the number that agrees with them.
	for _, tc := range []struct {
		ids  []int64
		want string
	}{
		{b.letters[1:2], fmt.Sprintf("dead letter %d is already in another open request: leave it out,", b.letters[1])},
		{b.letters[1:3], fmt.Sprintf("dead letters %d, %d are already in another open request: leave them out,", b.letters[1], b.letters[2])},
	} {
		_, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: tc.ids}, Why: "x"})
		wantRefusal(t, err, "one-open-request")
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refusal %q, want it to say %q", err, tc.want)
		}
	}
	// Rejecting the first request frees its letter.
	if _, err := b.as("bob").Reject(ctx, first.ID, replay.ReviewOptions{Why: "not now"}); err != nil {
		t.Fatal(err)
	}
	b.request(t, "alice", b.letters[0])
}

func TestFrozenCohortCannotGrowOrShrink(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	req := b.request(t, "alice", b.letters[0])
	wantRefusal(t, b.asDatabaseRefusal(t, `INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, ordinal, payload_sha256)
		VALUES ($1, $2, 5, '\x00')`, req.ID, b.letters[2]), "cohort-frozen")
	wantRefusal(t, b.asDatabaseRefusal(t, `DELETE FROM expiryctl.replay_items WHERE request_id = $1`, req.ID), "cohort-frozen")
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_items SET dead_letter_id = $2 WHERE request_id = $1`, req.ID, b.letters[2]), "cohort-frozen")
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET rate = 1 WHERE id = $1`, req.ID), "frozen-request")
}

// TestItemsMoveOnlyWhileRunning: no client marks an item published, failed
// or skipped unless its request is running, not even after approval.
func TestItemsMoveOnlyWhileRunning(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	req := b.request(t, "alice", b.letters[0])
	for _, state := range []string{"publishing", "failed", "skipped"} {
		wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_items SET state = $2 WHERE request_id = $1`, req.ID, state), "approved-to-run")
	}
	// pending -> confirmed is no move at all for a replay.
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_items SET state = 'confirmed' WHERE request_id = $1`, req.ID), "item-states")
	if _, err := b.as("bob").Approve(context.Background(), req.ID, replay.ReviewOptions{CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_items SET state = 'publishing' WHERE request_id = $1`, req.ID), "approved-to-run")
}

func TestApprovalIsSingleUse(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	req := b.request(t, "alice", b.letters[0])
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET status = 'running' WHERE id = $1`, req.ID), "approved-to-run")
	if _, err := b.as("bob").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE expiryctl.replay_requests SET status = 'running' WHERE id = $1`, req.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE expiryctl.replay_requests SET status = 'completed' WHERE id = $1`, req.ID); err != nil {
		t.Fatal(err)
	}
	// Spent: no way back to running, and no second approval of a finished request.
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET status = 'running' WHERE id = $1`, req.ID), "approved-to-run")
	_, err := b.as("carol").Approve(ctx, req.ID, replay.ReviewOptions{CohortHash: req.CohortHash})
	wantRefusal(t, err, "single-review")
	wantRefusal(t, b.asDatabaseRefusal(t, `UPDATE expiryctl.replay_requests SET approval_spent = false WHERE id = $1`, req.ID), "single-use-approval")
}

func TestFreshKeyNeedsConfirmationAndConsent(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	_, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:1]}, Why: "x", FreshKey: true})
	wantRefusal(t, err, "fresh-key")
	created, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:1]},
		Why: "x", FreshKey: true, ConfirmEligible: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.as("bob").Approve(ctx, created.Request.ID, replay.ReviewOptions{CohortHash: created.Request.CohortHash})
	wantRefusal(t, err, "fresh-key")
	if _, err := b.as("bob").Approve(ctx, created.Request.ID, replay.ReviewOptions{AllowFreshKey: true, CohortHash: created.Request.CohortHash}); err != nil {
		t.Fatal(err)
	}
}

func TestDBRoleIdentityMode(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	if _, err := replay.SetPolicy(ctx, b.pool, "admin", map[string]any{"identity_mode": "db-role"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.as("alice").Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters[:1]}, Why: "x"})
	wantRefusal(t, err, "identity-db-role")
	// The label may be the login itself, or left out (then it is the login).
	alice := b.people.Get("alice")
	for _, label := range []string{alice.Name, ""} {
		created, err := (&replay.Service{Pool: alice.Pool, Actor: label}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
			Selection: replay.Selection{IDs: b.letters[:1]}, Why: "x"})
		if err != nil {
			t.Fatalf("create as the database role, label %q: %v", label, err)
		}
		if created.Request.RequestedBy != alice.Name {
			t.Errorf("requested_by = %q, want the login %s", created.Request.RequestedBy, alice.Name)
		}
		if _, err := b.as("bob").Cancel(ctx, created.Request.ID, "again"); err == nil {
			t.Fatal("bob's label differs from his login: cancel should be refused")
		}
		if _, err := (&replay.Service{Pool: alice.Pool}).Cancel(ctx, created.Request.ID, "again"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWhyIsRequired(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 1)
	_, err := b.as("alice").Create(context.Background(), replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: b.letters}, Why: " "})
	wantRefusal(t, err, "why")
}

func mustInterval(t *testing.T, s string) any {
	t.Helper()
	changes, err := replay.ParsePolicyChanges([]string{"approval_ttl=" + s})
	if err != nil {
		t.Fatal(err)
	}
	return changes["approval_ttl"]
}

func assertAudited(t *testing.T, pool *pgxpool.Pool, action, outcome string) {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1 AND outcome = $2`, action, outcome).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no %s audit row with outcome %s", action, outcome)
	}
}
