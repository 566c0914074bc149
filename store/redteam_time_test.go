package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestRetryAfterOf: the Retry-After a letter's last error carried, as the
// archive encodes its headers: the reference worker's whole seconds (a
// plain or a narrow integer), an HTTP service's seconds or date, and
// anything else marked unreadable (infinity) rather than guessed.
func TestRetryAfterOf(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	at := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	for headers, want := range map[string]string{
		`{}`:                                "none",
		`{"x-retry-after": null}`:           "none",
		`{"x-retry-after": 30}`:             "2026-12-05T09:00:30Z",
		`{"x-retry-after": {"$int32": 45}}`: "2026-12-05T09:00:45Z",
		`{"retry-after": " 120 "}`:          "2026-12-05T09:02:00Z",
		`{"Retry-After": "Wed, 09 Dec 2026 07:28:00 GMT"}`: "2026-12-09T07:28:00Z",
		`{"retry-after": "soon"}`:                          "infinity",
		`{"retry-after": "Wed, 32 Dec 2026 07:28:00 GMT"}`: "infinity",
		`{"x-retry-after": -5}`:                            "infinity",
		`{"x-retry-after": 1.5}`:                           "infinity",
		`{"x-retry-after": {"$bytes": "MzA="}}`:            "infinity",
	} {
		var got string
		err := rt.owner.QueryRow(context.Background(), `SELECT coalesce(CASE WHEN r = 'infinity' THEN 'infinity'
			ELSE to_char(r AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') END, 'none')
			FROM expiryctl.retry_after_of($1::jsonb, $2) r`, headers, at).Scan(&got)
		if err != nil || got != want {
			t.Errorf("retry_after_of(%s) = %q, %v; want %q", headers, got, err, want)
		}
	}
}

// TestRedTeamTime: a person with their own login and raw SQL cannot
// schedule a replay into the past or past retention, slip in a letter
// whose Retry-After nobody can read, publish an item before its time, or
// move a request's time once it is frozen.
func TestRedTeamTime(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	create := `SELECT * FROM expiryctl.replay_request_create('', 'replay', jsonb_build_object('ids', $1::bigint[]), NULL, 0, '', '', 'INC-1',
		false, false, false, NULL, false, false, $2, $3)`
	one := []int64{rt.letters[0]}
	refused(t, rt.alice.Pool, "not-before", create, one, time.Now().Add(-time.Minute), false)
	refused(t, rt.alice.Pool, "not-before", create, one, time.Now().Add(10*365*24*time.Hour), false)
	refused(t, rt.alice.Pool, "kind", `SELECT * FROM expiryctl.replay_request_create('', 'discard', jsonb_build_object('ids', $1::bigint[]), NULL, 0, '', '', 'INC-1',
		false, false, false, NULL, false, false, now() + interval '1 hour', false)`, one)

	// A letter whose Retry-After nobody can read is refused by name, unless
	// the request says it goes without waiting.
	body := []byte(`{"reservation_id":"r-odd","expected_version":1,"idempotency_key":"expire:r-odd:v1"}`)
	odd := deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: "expire:r-odd:v1", ReservationID: "r-odd",
		IdempotencyKey: "expire:r-odd:v1", SourceQueue: "q.dlq", Category: deadletter.TransientExhausted,
		Headers: deadletter.EncodeHeaders(map[string]any{"retry-after": "after lunch"}), Payload: body,
		DeadLetteredAt: time.Now().Add(-time.Minute)}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", []deadletter.Letter{odd}); err != nil {
		t.Fatal(err)
	}
	var oddID int64
	if err := rt.owner.QueryRow(ctx, `SELECT id FROM expiryctl.dead_letters WHERE job_key = 'expire:r-odd:v1'`).Scan(&oddID); err != nil {
		t.Fatal(err)
	}
	refused(t, rt.alice.Pool, "retry-after", create, []int64{oddID}, nil, false)

	// A hold not due until after retention redacts its letter: refused
	// by name, unless the request says it goes without waiting.
	farBody := []byte(`{"reservation_id":"r-far","expected_version":1,"idempotency_key":"expire:r-far:v1","hold_until":"2030-01-01T00:00:00Z"}`)
	far := deadletter.Letter{Fingerprint: sha256.Sum256(farBody), JobKey: "expire:r-far:v1", ReservationID: "r-far",
		IdempotencyKey: "expire:r-far:v1", SourceQueue: "q.dlq", Category: deadletter.TransientExhausted,
		DueAt: new(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), Headers: []byte(`{}`), Payload: farBody,
		DeadLetteredAt: time.Now().Add(-time.Minute)}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", []deadletter.Letter{far}); err != nil {
		t.Fatal(err)
	}
	var farID int64
	if err := rt.owner.QueryRow(ctx, `SELECT id FROM expiryctl.dead_letters WHERE job_key = 'expire:r-far:v1'`).Scan(&farID); err != nil {
		t.Fatal(err)
	}
	refused(t, rt.alice.Pool, "not-before", create, []int64{farID}, nil, false)
	if _, err := rt.alice.Pool.Exec(ctx, create, []int64{oddID}, nil, true); err != nil {
		t.Errorf("with include_not_due the letter joins: %v", err)
	}

	// A request scheduled an hour ahead, approved and started: its items
	// are not cleared for a publish before then, whoever asks.
	var id int64
	if err := rt.alice.Pool.QueryRow(ctx, `SELECT request_id FROM expiryctl.replay_request_create('', 'replay',
		jsonb_build_object('ids', $1::bigint[]), NULL, 0, '', '', 'INC-1', false, false, true, 'test: no consumer', false, false,
		now() + interval '1 hour', false)`, rt.letters[1:3]).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var hash []byte
	if err := rt.owner.QueryRow(ctx, `SELECT cohort_hash FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.bob.Pool.Exec(ctx, `SELECT expiryctl.replay_review('', $1, 'approve', 'ok', false, $2, NULL)`, id, hash); err != nil {
		t.Fatal(err)
	}
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET not_before = now() WHERE id = $1`, id)
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET include_not_due = true WHERE id = $1`, id)
	refused(t, rt.owner, "cohort-frozen", `UPDATE expiryctl.replay_items SET retry_after = now() - interval '1 day' WHERE request_id = $1`, id)

	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'alice')`, id); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`SELECT * FROM expiryctl.replay_run_start('', $1, $2, $3)`} {
		if _, err := rt.alice.Pool.Exec(ctx, sql, id, freshConsumers, capturesQDLQ); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, id, rt.letters[1:3]); err != nil {
		t.Fatal(err)
	}
	refused(t, rt.alice.Pool, "not-before", `SELECT expiryctl.replay_items_send($1, 0, 1, $2)`, id, rt.letters[1:3])
	// A RabbitMQ request has no delivery delay to lean on: saying so
	// changes nothing.
	refused(t, rt.alice.Pool, "not-before", `SELECT expiryctl.replay_items_send($1, 0, 1, $2, true)`, id, rt.letters[1:3])
	var sends int
	if err := rt.owner.QueryRow(ctx, `SELECT sum(sends) FROM expiryctl.replay_items WHERE request_id = $1`, id).Scan(&sends); err != nil || sends != 0 {
		t.Errorf("%d sends counted (%v), want none", sends, err)
	}
}

// TestRedTeamSQSDelay: an SQS request's items may be cleared before their
// time when the runner says their messages carry the rest of the wait as
// SQS's delivery delay, but no more than SQS's longest delay (900 s)
// before it; without that word, further ahead, or bound for a FIFO queue
// (which delays no single message), they are refused as any other
// request's (rule not-before).
func TestRedTeamSQSDelay(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	dlqARN := "arn:aws:sqs:us-east-1:100010001000:q-dlq"
	workARN := "arn:aws:sqs:us-east-1:100010001000:q"
	// The last two failed in a FIFO queue, which delays no single message.
	fifoARN := "arn:aws:sqs:us-east-1:100010001000:q.fifo"
	letters := make([]deadletter.Letter, 6)
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-sqs-%d","idempotency_key":"expire:r-sqs-%d:v1"}`, i, i)
		origin := workARN
		if i >= 4 {
			origin = fifoARN
		}
		letters[i] = deadletter.Letter{System: deadletter.SQS, Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-sqs-%d:v1", i),
			ReservationID: fmt.Sprintf("r-sqs-%d", i), IdempotencyKey: fmt.Sprintf("expire:r-sqs-%d:v1", i), SourceQueue: dlqARN,
			OriginQueue: origin, Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body,
			DeadLetteredAt: time.Now().Add(-time.Minute)}
	}
	stored, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", dlqARN, letters)
	if err != nil || stored.Stored != len(letters) {
		t.Fatalf("capture: %+v, %v", stored, err)
	}
	ids := make([]int64, len(letters))
	for i := range ids {
		ids[i] = stored.FirstID + int64(i)
	}
	captures := fmt.Sprintf(`{"queues": [{"queue": %q, "by": "run"}]}`, dlqARN)
	started := func(cohort []int64, ahead string) int64 {
		t.Helper()
		var id int64
		if err := rt.alice.Pool.QueryRow(ctx, `SELECT request_id FROM expiryctl.replay_request_create('', 'replay',
			jsonb_build_object('ids', $1::bigint[]), NULL, 0, '', '', 'INC-1', false, false, true, 'SQS shows no consumers', false, false,
			now() + $2::interval, false)`, cohort, ahead).Scan(&id); err != nil {
			t.Fatal(err)
		}
		var hash []byte
		if err := rt.owner.QueryRow(ctx, `SELECT cohort_hash FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&hash); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.bob.Pool.Exec(ctx, `SELECT expiryctl.replay_review('', $1, 'approve', 'ok', false, $2, NULL)`, id, hash); err != nil {
			t.Fatal(err)
		}
		rt.holdLock(t, id)
		if _, err := rt.alice.Pool.Exec(ctx, `SELECT * FROM expiryctl.replay_run_start('', $1, $2, $3)`, id, freshConsumers, captures); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, id, cohort); err != nil {
			t.Fatal(err)
		}
		return id
	}

	soon := started(ids[:2], "10 minutes")
	refused(t, rt.alice.Pool, "not-before", `SELECT expiryctl.replay_items_send($1, 0, 1, $2)`, soon, ids[:2])
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_send($1, 0, 1, $2, true)`, soon, ids[:2]); err != nil {
		t.Errorf("items 10 minutes ahead, sent with SQS's delay: %v", err)
	}

	later := started(ids[2:4], "20 minutes")
	refused(t, rt.alice.Pool, "not-before", `SELECT expiryctl.replay_items_send($1, 0, 1, $2, true)`, later, ids[2:4])

	// A FIFO queue takes no delay on one message, so the runner's word
	// that its messages carry one cannot be true.
	fifo := started(ids[4:], "10 minutes")
	refused(t, rt.alice.Pool, "not-before", `SELECT expiryctl.replay_items_send($1, 0, 1, $2, true)`, fifo, ids[4:])
}
