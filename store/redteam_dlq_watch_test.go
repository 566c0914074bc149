package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// capturesQDLQ is a runner's word that it captures q.dlq, where the red
// team's letters came from: the database cannot see the broker, so it
// takes the runner's word, records it on the run's audit row, and the red
// team's run tests that are not about watching claim it.
const capturesQDLQ = `{"queues": [{"queue": "q.dlq", "by": "run"}]}`

// TestRedTeamRunMustWatchItsDLQ: alice, an operator holding the runner
// lease, starts a replay with raw SQL, saying nothing of the dead-letter
// queue its cohort came from, that it cannot capture it, or that it
// captures another queue: each is refused (dlq-unwatched), and the
// approval is not spent. Saying that it captures q.dlq starts it, and the
// run's audit row keeps that word. The owner cannot take a request's
// --unwatched reason back or give one to a request that had none.
func TestRedTeamRunMustWatchItsDLQ(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	created, err := (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: rt.letters[:2]}, Why: "INC-1", Canary: new(int)})
	if err != nil {
		t.Fatal(err)
	}
	req := created.Request
	rt.approve(t, rt.bob, req)
	rt.holdLock(t, req.ID)
	start := `SELECT * FROM expiryctl.replay_run_start('', $1, $2, $3)`
	for _, watch := range []any{
		nil,
		`{}`,
		`{"queues": []}`,
		`{"queues": [{"queue": "q.dlq", "unwatched": "queue q.dlq does not exist"}]}`,
		`{"queues": [{"queue": "other.dlq", "by": "run"}]}`,
		`{"queues": [{"queue": "q.dlq", "by": ""}]}`,
	} {
		refused(t, rt.alice.Pool, "dlq-unwatched", start, req.ID, freshConsumers, watch)
	}
	var status string
	var spent bool
	if err := rt.owner.QueryRow(ctx, `SELECT status, approval_spent FROM expiryctl.replay_requests WHERE id = $1`, req.ID).Scan(&status, &spent); err != nil {
		t.Fatal(err)
	}
	if status != "approved" || spent {
		t.Fatalf("after the refused starts the request is %s (approval spent %v), want approved and unspent", status, spent)
	}
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET unwatched_why = 'never mind' WHERE id = $1`, req.ID)

	if _, err := rt.alice.Pool.Exec(ctx, start, req.ID, freshConsumers, capturesQDLQ); err != nil {
		t.Fatalf("a run that captures q.dlq did not start: %v", err)
	}
	var watched string
	if err := rt.owner.QueryRow(ctx, `SELECT details->'dlq_watch'->'queues'->0->>'by' FROM expiryctl.audit_log
		WHERE action = 'replay.run.start' AND target = $1`, fmt.Sprintf("replay_request:%d", req.ID)).Scan(&watched); err != nil {
		t.Fatal(err)
	}
	if watched != "run" {
		t.Errorf("the run's audit row says the queue was watched by %q, want run", watched)
	}

	// A request that says --unwatched starts with nothing watched; the
	// reason cannot be blank, and cannot be dropped.
	refused(t, rt.alice.Pool, "dlq-unwatched", `SELECT * FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, NULL, 0, '', '', 'INC-2',
		false, false, false, NULL, false, false, NULL, false, '   ')`, fmt.Sprintf(`{"ids": [%d]}`, rt.letters[2]))
	loose, err := (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: rt.letters[2:3]}, Why: "INC-2", Canary: new(int),
		UnwatchedWhy: "the other site captures q.dlq"})
	if err != nil {
		t.Fatal(err)
	}
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET unwatched_why = NULL WHERE id = $1`, loose.Request.ID)
	rt.approve(t, rt.bob, loose.Request)
	rt.holdLock(t, loose.Request.ID)
	if _, err := rt.alice.Pool.Exec(ctx, start, loose.Request.ID, freshConsumers, nil); err != nil {
		t.Fatalf("an --unwatched request did not start: %v", err)
	}
}

// TestRedTeamOperatorCapture: an operator captures only the dead-letter
// queues of a replay whose runner lease its login holds. alice, with no
// lease, is refused a capture of q.dlq; holding the lease of a request
// whose cohort came from q.dlq she may capture q.dlq, with by_run on the
// batch's audit row, and still not another queue, nor letters of another
// queue hidden in a batch labelled q.dlq. Once her lease is gone she is
// refused again. An approver with no operator membership is refused
// throughout.
func TestRedTeamOperatorCapture(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	n := 0
	letter := func(queue string) deadletter.Letter {
		n++
		body := fmt.Appendf(nil, `{"reservation_id":"cap-%d"}`, n)
		return deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:cap-%d:v1", n),
			ReservationID: fmt.Sprintf("cap-%d", n), SourceQueue: queue, Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Now()}
	}
	// refusedCapture asserts that the database refused a capture by the
	// governance rule role.
	refusedCapture := func(what string, err error) {
		t.Helper()
		var refusal *store.Refusal
		if !errors.As(store.AsRefusal(err), &refusal) || refusal.Rule != "role" {
			t.Errorf("%s: %v, want refused by rule role", what, err)
		}
	}
	_, err := deadletter.InsertAs(ctx, rt.alice.Pool, "", "q.dlq", []deadletter.Letter{letter("q.dlq")})
	refusedCapture("alice captures q.dlq with no lease", err)

	req := rt.request(t, rt.letters[0])
	rt.approve(t, rt.bob, req)
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'alice')`, req.ID); err != nil {
		t.Fatal(err)
	}
	res, err := deadletter.InsertAs(ctx, rt.alice.Pool, "", "q.dlq", []deadletter.Letter{letter("q.dlq"), letter("q.dlq")})
	if err != nil || res.Stored != 2 {
		t.Fatalf("alice, holding the lease of a q.dlq cohort, captured %+v: %v", res, err)
	}
	var byRun bool
	if err := rt.owner.QueryRow(ctx, `SELECT coalesce((details->>'by_run')::boolean, false) FROM expiryctl.audit_log
		WHERE action = 'dlq.ingest.batch' AND db_role = $1`, rt.alice.Name).Scan(&byRun); err != nil {
		t.Fatal(err)
	}
	if !byRun {
		t.Error("the batch alice's run captured does not say by_run")
	}
	_, err = deadletter.InsertAs(ctx, rt.alice.Pool, "", "other.dlq", []deadletter.Letter{letter("other.dlq")})
	refusedCapture("alice captures another queue", err)
	_, err = deadletter.InsertAs(ctx, rt.alice.Pool, "", "q.dlq", []deadletter.Letter{letter("q.dlq"), letter("other.dlq")})
	refusedCapture("alice hides a letter of another queue in a q.dlq batch", err)
	_, err = deadletter.InsertAs(ctx, rt.bob.Pool, "", "q.dlq", []deadletter.Letter{letter("q.dlq")})
	if err == nil {
		t.Error("bob, an approver, captured q.dlq")
	}

	pid := lock.PgConn().PID()
	if err := lock.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The server ends a closed session a moment after the client goes.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var standing bool
		if err := rt.owner.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&standing); err != nil {
			t.Fatal(err)
		}
		if !standing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's lease session still stands 10 s after it closed")
		}
	}
	_, err = deadletter.InsertAs(ctx, rt.alice.Pool, "", "q.dlq", []deadletter.Letter{letter("q.dlq")})
	refusedCapture("alice captures q.dlq after her lease went", err)
	var stored int
	if err := rt.owner.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE reservation_id LIKE 'cap-%'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 2 {
		t.Errorf("%d captured letters stored, want the 2 alice captured under her lease", stored)
	}
}
