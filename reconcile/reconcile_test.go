package reconcile_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/reconcile"
	"github.com/expiryctl/expiryctl/replay"
)

// governed is a database in which people did what the rules allow: a
// request left pending, one approved, one rejected, a discard run to the
// end, and a policy change proposed by one admin and approved by another.
// It returns the database, the ids of those requests, and the logins of
// alice and bob.
func governed(t *testing.T) (*pgtest.Database, map[string]int64, map[string]string) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	alice := db.GrantedLogin(t, "alice", "expiryctl_operator")
	bob := db.GrantedLogin(t, "bob", "expiryctl_approver")
	dave := db.GrantedLogin(t, "dave", "expiryctl_admin")
	erin := db.GrantedLogin(t, "erin", "expiryctl_admin")
	ids := map[string]int64{}
	letters := make([]deadletter.Letter, 8)
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"k-%d"}`, i, i)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("k-%d", i), SourceQueue: "q.dlq",
			OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire", Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, i, 0, time.UTC)}
	}
	if _, err := deadletter.Insert(ctx, db.Pool, letters); err != nil {
		t.Fatal(err)
	}
	requester := &replay.Service{Pool: alice.Pool}
	approver := &replay.Service{Pool: bob.Pool}
	create := func(name string, kind replay.Kind, letters ...int64) {
		c, err := requester.Create(ctx, replay.NewRequest{Kind: kind, Selection: replay.Selection{IDs: letters}, Why: "INC-1 " + name})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = c.Request.ID
	}
	create("pending", replay.KindReplay, 1, 2)
	create("approved", replay.KindReplay, 3)
	create("rejected", replay.KindReplay, 4)
	create("discarded", replay.KindDiscard, 5, 6)
	for name, approve := range map[string]bool{"approved": true, "rejected": false, "discarded": true} {
		d, err := approver.Show(ctx, ids[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		opts := replay.ReviewOptions{Why: "checked", CohortHash: d.CohortHash}
		if approve {
			_, err = approver.Approve(ctx, ids[name], opts)
		} else {
			_, err = approver.Reject(ctx, ids[name], opts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (&replay.Runner{Pool: alice.Pool, Actor: "alice"}).Run(ctx, ids["discarded"]); err != nil {
		t.Fatal(err)
	}
	proposed, err := replay.SetPolicyWhy(ctx, dave.Pool, "", map[string]any{"max_rate": 20.0}, "INC-1 slow down")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.ReviewPolicyChange(ctx, erin.Pool, "", proposed.ChangeID, true, "agreed"); err != nil {
		t.Fatal(err)
	}
	return db, ids, map[string]string{"alice": alice.Name, "bob": bob.Name}
}

// byHand runs sql as a superuser with the tables' guards off, as someone
// going around the rules would.
func byHand(t *testing.T, db *pgtest.Database, sql string) {
	t.Helper()
	ctx := context.Background()
	superuser := db.Superuser(t)
	err := pgx.BeginFunc(ctx, superuser, func(tx pgx.Tx) error {
		for _, stmt := range []string{`SET LOCAL session_replication_role = replica`, sql} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReconcileCleanAfterGovernedWork(t *testing.T) {
	t.Parallel()
	db, _, _ := governed(t)
	rep, err := reconcile.Check(context.Background(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 4 || rep.PolicyFrom == 0 {
		t.Errorf("report %+v: want 4 requests and the policy compared with its approval", rep)
	}
}

func TestReconcileReportsHandEdits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name               string
		sql                func(ids map[string]int64) string
		table, key, column string
	}{
		{"a pending request approved by hand", func(ids map[string]int64) string {
			return fmt.Sprintf(`UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob', reviewed_db_role = 'bob' WHERE id = %d`, ids["pending"])
		}, "replay_requests", "id %d:pending", "status"},
		{"a rejection turned into an approval", func(ids map[string]int64) string {
			return fmt.Sprintf(`UPDATE expiryctl.replay_requests SET status = 'approved' WHERE id = %d`, ids["rejected"])
		}, "replay_requests", "id %d:rejected", "status"},
		{"the reviewer rewritten", func(ids map[string]int64) string {
			return fmt.Sprintf(`UPDATE expiryctl.replay_requests SET reviewed_db_role = 'carol' WHERE id = %d`, ids["approved"])
		}, "replay_requests", "id %d:approved", "reviewed_db_role"},
		{"items of a completed run reset to pending", func(ids map[string]int64) string {
			return fmt.Sprintf(`UPDATE expiryctl.replay_items SET state = 'pending' WHERE request_id = %d`, ids["discarded"])
		}, "replay_items", "request %d:discarded dead letter 5", "state"},
		{"an item confirmed in a request that never ran", func(ids map[string]int64) string {
			return fmt.Sprintf(`UPDATE expiryctl.replay_items SET state = 'confirmed' WHERE request_id = %d AND dead_letter_id = 3`, ids["approved"])
		}, "replay_items", "request %d:approved", "state"},
		{"a request inserted by hand", func(ids map[string]int64) string {
			return `INSERT INTO expiryctl.replay_requests (kind, item_count, cohort_hash, rate, stop_failure_ratio, stop_queue_depth,
				stop_redead_ratio, canary_window, why, requested_by, expires_at, status)
				VALUES ('replay', 1, '\x01', 1, 0.1, 100, 0.1, '1 minute', 'forged', 'alice', now() + interval '1 hour', 'pending')`
		}, "replay_requests", "", "id"},
		{"the policy changed by hand", func(map[string]int64) string {
			return `UPDATE expiryctl.policy SET max_rate = 500`
		}, "policy", "singleton", "max_rate"},
		{"signed approvals required by hand", func(map[string]int64) string {
			return `UPDATE expiryctl.policy SET signed_approvals = true`
		}, "policy", "singleton", "signed_approvals"},
		{"a group granted by hand", func(map[string]int64) string {
			return "GRANT expiryctl_admin TO {alice}"
		}, "pg_auth_members", "login {alice}", "expiryctl_admin"},
		{"a grant revoked by hand", func(map[string]int64) string {
			return "REVOKE expiryctl_approver FROM {bob}"
		}, "pg_auth_members", "login {bob}", "expiryctl_approver"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, ids, people := governed(t)
			sql, key := c.sql(ids), c.key
			for person, login := range people {
				sql = strings.ReplaceAll(sql, "{"+person+"}", login)
				key = strings.ReplaceAll(key, "{"+person+"}", login)
			}
			byHand(t, db, sql)
			_, err := reconcile.Check(context.Background(), db.Pool)
			var mismatch *reconcile.MismatchError
			if !errors.As(err, &mismatch) {
				t.Fatalf("Check = %v, want a *MismatchError", err)
			}
			if name, rest, ok := strings.Cut(key, ":"); ok {
				// "id %d:pending" names the request of that name.
				key = fmt.Sprintf(name, ids[strings.Fields(rest)[0]]) + strings.TrimPrefix(rest, strings.Fields(rest)[0])
			}
			found := false
			for _, f := range mismatch.Findings {
				if f.Table == c.table && f.Column == c.column && (key == "" || f.Key == key) {
					found = true
				}
			}
			if !found {
				t.Errorf("no finding on %s %q column %s in %+v", c.table, key, c.column, mismatch.Findings)
			}
			t.Log(err)
		})
	}
}

// TestReconcileHaltedRequest: a run that halts on unroutable publishes
// reconciles clean, and a halted request's item set back to pending by
// hand is reported against the halt's counts.
func TestReconcileHaltedRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	alice := db.GrantedLogin(t, "alice", "expiryctl_operator")
	bob := db.GrantedLogin(t, "bob", "expiryctl_approver")
	conn := amqptest.Dial(t)
	exchange := amqptest.Name(t, ".x")
	amqptest.DeleteOnCleanup(t, nil, []string{exchange})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	letters := make([]deadletter.Letter, 15)
	ids := make([]int64, len(letters))
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"k-%d"}`, i, i)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("k-%d", i), SourceQueue: "q.dlq",
			OriginalExchange: exchange, OriginalRoutingKey: "no.such.binding", Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, i, 0, time.UTC)}
		ids[i] = int64(i + 1)
	}
	if _, err := deadletter.Insert(ctx, db.Pool, letters); err != nil {
		t.Fatal(err)
	}
	zero := 0
	created, err := (&replay.Service{Pool: alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: ids},
		Canary: &zero, Why: "INC-2", SameHandlerWhy: "the halt is what is reconciled, not the handler",
		UnwatchedWhy: "the letters come from no queue of the broker"})
	if err != nil {
		t.Fatal(err)
	}
	approver := &replay.Service{Pool: bob.Pool}
	shown, err := approver.Show(ctx, created.Request.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Approve(ctx, created.Request.ID, replay.ReviewOptions{Why: "ok", CohortHash: shown.CohortHash}); err != nil {
		t.Fatal(err)
	}
	broker, err := broker.NewAMQPBroker(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	_, err = (&replay.Runner{Pool: alice.Pool, Broker: broker, Actor: "alice"}).Run(ctx, created.Request.ID)
	var halt *replay.HaltError
	if !errors.As(err, &halt) {
		t.Fatalf("run = %v, want a halt", err)
	}
	if _, err := reconcile.Check(ctx, db.Pool); err != nil {
		t.Fatalf("a halted run does not reconcile: %v", err)
	}
	byHand(t, db, fmt.Sprintf(`UPDATE expiryctl.replay_items SET state = 'pending' WHERE request_id = %d AND state = 'failed'`, created.Request.ID))
	_, err = reconcile.Check(ctx, db.Pool)
	var mismatch *reconcile.MismatchError
	if !errors.As(err, &mismatch) || mismatch.Findings[0].Table != "replay_items" || !strings.Contains(mismatch.Findings[0].Detail, "replay.halt") {
		t.Fatalf("failed items reset by hand in a halted request: %v", err)
	}
	t.Log(err)
}

// A named deployment's groups are its own: every member the trail does not
// account for is reported, whether it acted here or not.
func TestReconcileReportsEveryUnexplainedMemberOfADeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDeployment(t, pgtest.DeploymentName("rc"))
	alice := db.GrantedLogin(t, "alice", "expiryctl_operator")
	eve := db.Login(t, "eve", "expiryctl_approver") // by a DBA's hand, and idle
	_, err := reconcile.Check(ctx, db.Pool)
	var mismatch *reconcile.MismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("reconcile: %v, want eve's membership reported", err)
	}
	var eves int
	for _, f := range mismatch.Findings {
		switch f.Key {
		case "login " + eve.Name:
			eves++
			if f.Column != db.Deployment.MustGroup("approver") {
				t.Errorf("eve's finding names %s", f.Column)
			}
		case "login " + alice.Name:
			t.Errorf("alice, granted through expiryctl, reported: %+v", f)
		default:
			t.Errorf("unexpected finding %+v", f)
		}
	}
	if eves != 1 {
		t.Errorf("%d findings for eve, want 1: %+v", eves, mismatch.Findings)
	}
}
